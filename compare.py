#!/usr/bin/env python
"""Summarise run folders into one table: training and validation figures plus test scores.

Examples:
  python compare.py runs/demo/sinusoidal runs/demo/learnable runs/demo/rope
  python compare.py "runs/demo/*" --output runs/demo/summary     # writes summary.md and summary.csv

Numbers come from each run's own files: metrics.jsonl (training/validation log) and
test/scores.json (written by test.py).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
from pathlib import Path
from typing import Optional

import yaml

COLUMNS = [
    ("run", "run"), ("encoding", "encoding"), ("train_loss", "train loss"), ("valid_loss", "valid loss"),
    ("valid_accuracy", "valid acc"), ("sacrebleu", "test sacreBLEU"), ("chrf", "test chrF"),
    ("nltk_bleu4", "test nltk BLEU-4"), ("longer_bleu", "BLEU longer-than-training"), ("params", "params"), ("train_minutes", "train min"),
    ("steps", "steps"),
]


def summarise_run(run_dir: Path) -> Optional[dict]:
    """One row for a run folder, or None if it is not one (no config.yaml)."""
    if not (run_dir / "config.yaml").is_file():
        return None
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()] if (run_dir / "metrics.jsonl").is_file() else []
    valid = [r for r in records if r["event"] == "valid"]
    ends = [r for r in records if r["event"] == "end"]
    metric = cfg["training"]["checkpoint_metric"]
    best = None
    if valid:
        sign = -1.0 if metric == "valid_loss" else 1.0
        scored = [r for r in valid if r.get(metric) is not None]
        best = max(scored, key=lambda r: sign * r[metric]) if scored else valid[-1]
    row = {"run": str(run_dir), "encoding": cfg["model"]["positional"]["name"],
           "train_loss": ends[-1].get("final_train_loss") if ends else None,
           "valid_loss": best.get("valid_loss") if best else None,
           "valid_accuracy": best.get("valid_accuracy") if best else None,
           "params": ends[-1]["params"] if ends else None,
           "train_minutes": ends[-1]["total_train_seconds"] / 60 if ends else None,
           "steps": ends[-1]["step"] if ends else None}
    scores_path = run_dir / "test" / "scores.json"
    scores = json.loads(scores_path.read_text(encoding="utf-8")) if scores_path.is_file() else {}
    for key in ("sacrebleu", "chrf", "nltk_bleu4", "sacrebleu_signature", "nltk_tokenization"):
        row[key] = scores.get(key)
    row["longer_bleu"] = (scores.get("longer_than_training") or {}).get("sacrebleu")
    row["by_source_length"] = scores.get("by_source_length")
    return row


def fmt(key: str, value) -> str:
    if value is None:
        return "–"
    if key in ("train_loss", "valid_loss", "nltk_bleu4", "valid_accuracy"):
        return f"{value:.4f}"
    if key in ("sacrebleu", "chrf", "train_minutes", "longer_bleu"):
        return f"{value:.2f}" if key != "train_minutes" else f"{value:.1f}"
    if key == "params":
        return f"{value / 1e6:.2f}M"
    return str(value)


def markdown_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
             "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(fmt(k, r.get(k)) for k, _ in COLUMNS) + " |" for r in rows]
    signatures = sorted({r["sacrebleu_signature"] for r in rows if r.get("sacrebleu_signature")})
    if signatures:
        lines += ["", "sacreBLEU signature: " + "; ".join(f"`{s}`" for s in signatures)]
    tokenizations = sorted({r["nltk_tokenization"] for r in rows if r.get("nltk_tokenization")})
    if tokenizations:
        lines += ["nltk BLEU-4 is corpus BLEU on word tokens (" + "; ".join(tokenizations) + "), in [0, 1]."]
    return "\n".join(lines)


def bucket_table(rows: list[dict]) -> str:
    """Test sacreBLEU per source-length bucket (subword tokens), one row per run; empty if none has buckets."""
    runs = [r for r in rows if r.get("by_source_length")]
    if not runs:
        return ""
    labels = [b["bucket"] for b in runs[0]["by_source_length"]]
    counts = {b["bucket"]: b["num_sentences"] for b in runs[0]["by_source_length"]}
    lines = ["| run | encoding | " + " | ".join(f"{lab} (n={counts[lab]})" for lab in labels) + " |",
             "|---|---|" + "|".join("---" for _ in labels) + "|"]
    for r in runs:
        by = {b["bucket"]: b["sacrebleu"] for b in r["by_source_length"]}
        lines.append(f"| {r['run']} | {r['encoding']} | "
                     + " | ".join(fmt("sacrebleu", by.get(lab)) for lab in labels) + " |")
    return "Test sacreBLEU by source length (subword tokens):\n\n" + "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run folders or glob patterns (quote them)")
    parser.add_argument("--output", help="path prefix for <prefix>.md and <prefix>.csv")
    args = parser.parse_args(argv)
    paths: list[Path] = []
    for pattern in args.runs:
        matches = sorted(glob.glob(pattern)) or [pattern]
        paths += [Path(m) for m in matches]
    rows = [r for r in (summarise_run(p) for p in paths if p.is_dir()) if r is not None]
    if not rows:
        print(f"error: no run folders (with config.yaml) among {', '.join(args.runs)}")
        return 2
    table = markdown_table(rows)
    buckets = bucket_table(rows)
    if buckets:
        table += "\n\n" + buckets
    print(table)
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
        with open(out.with_suffix(".csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=[k for k, _ in COLUMNS] + ["sacrebleu_signature"],
                                    extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        print(f"\nwrote {out.with_suffix('.md')} and {out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
