#!/usr/bin/env python
"""Summarise run folders into one results table: one row per configuration, mean ± std over its
seeds, paired bootstrap significance against a baseline, scores per source length, and plots.

Examples:
  python compare.py runs/demo/sinusoidal runs/demo/learnable runs/demo/rope
  python compare.py "runs/demo/*" --output runs/demo/summary     # summary.md/.csv/.json + summary_*.png
  python compare.py "runs/seeds/*/*" --baseline rope --output runs/seeds/summary
  python compare.py "results/length/*" --family configs/length/findings/headline.yaml   # the declared headline family

Runs whose resolved config.yaml files are equal except for `seed`, `name`, `run_dir` and runtime
settings (where and how they ran: training.device, num_threads, data.cache_dir, ...) are one configuration
(the seeds of one experiment): one row, labelled by the run name without a seed suffix (`_seed2`, `-s2`, `/seed2`), numbers as `mean ± std` (sample std) with the number of seeds.
`p vs baseline` is the seed-level test of test sacreBLEU (evaluation/seed_test.py): Student's t over
the per-seed differences with the test set's joint-bootstrap variance added, two-sided, over the
seeds both configurations were run with (none with one seed). `seeds above baseline` counts the
seeds where this configuration is above the baseline by more than the tie margin. The findings
(`<prefix>_findings.md/.json`) word every comparison by one rule: only those declared in `--family`
(the study's configs/<study>/findings/headline.yaml) can say ahead/behind, Holm-corrected over that family;
each table states the smallest effect its seeds can see.
Runs scored with test.py's teacher-forced diagnostic add a column (`TF NLL beyond training`), a table
of NLL by target position, one of p(EOS) at the sentence boundaries per k and `<prefix>_teacher_forced.png`;
runs without it (older ones) are tabulated exactly as before.

Numbers come from each run's own files: metrics.jsonl (training/validation log) and
test/scores.json, test/hypotheses.txt, test/references.txt (written by test.py).
"""

from __future__ import annotations

import csv
import glob
import io
import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Optional

from evaluation.comparison_plots import write_plots
from evaluation.degradation import degradation_stats, degradation_table
from evaluation.length_report import add_concat_stats, concat_tables
from evaluation.findings import compute_findings, find_row, findings_markdown
from evaluation.headline import headline_markdown
from evaluation.seed_test import load_family
from evaluation.run_stats import mean_std, read_lines, seed_wins, test_folder, training_minutes
from evaluation.teacher_forced import pool_nll
from evaluation.summary_tables import (NUMERIC, bucket_table, csv_rows, json_report, markdown_table,
                                       teacher_forced_tables)
from utils.config import flatten, load_config, to_dict
from utils.config_schema import METRIC_SIGN
from utils.cli import command_parser, main_guard
from utils.errors import HarnessError
from utils.files import atomic_write_text, check_target
from utils.key_roles import configuration_settings
from utils.runtime import JsonlLogger

SEED_SUFFIX = re.compile(r"[_\-/.](?:seed|s)[_\-=]?\d+$", re.IGNORECASE)


class CompareError(HarnessError):
    """Runs that cannot be compared (e.g. scored on different test sets)."""


# ----------------------------------------------------------------------------- reading runs


def summarise_run(run_dir: Path, variant: Optional[tuple[str, dict]] = None) -> Optional[dict]:
    """One row for a run folder, or None if it is not one (no config.yaml). With `variant` (folder
    name, test-time settings), the row of the run tested so, in <run>/<folder>/ (`run_variants`)."""
    if not (run_dir / "config.yaml").is_file():
        return None
    test_dir, settings = variant or ("test", {})
    # Through the loader, so runs saved with an older spelling of a key group with today's runs; a
    # variant's settings make it a configuration of its own.
    cfg = to_dict(load_config(run_dir / "config.yaml", [f"{k}={json.dumps(v)}" for k, v in settings.items()]))
    try:
        records = JsonlLogger(run_dir / "metrics.jsonl").history()
    except ValueError as e:
        raise CompareError(f"{run_dir / 'metrics.jsonl'} is not a log of JSON lines ({e}); "
                           f"leave the run out or repair the line") from None
    valid = [r for r in records if r["event"] == "valid"]
    ends = [r for r in records if r["event"] == "end"]
    speeds = [r["tokens_per_sec"] for r in records if r["event"] == "train" and r.get("tokens_per_sec") is not None]
    metric = cfg["training"]["checkpoint_metric"]
    best = None
    if valid:
        sign = METRIC_SIGN[metric]
        scored = [r for r in valid if r.get(metric) is not None and math.isfinite(r[metric])]
        best = max(scored, key=lambda r: sign * r[metric]) if scored else valid[-1]
    name = cfg.get("name") or run_dir.name
    if settings:
        name += " [" + ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in settings.items()) + "]"
    row = {"run": str(run_dir), "test_dir": str(run_dir / test_dir), "name": name, "seed": cfg.get("seed"),
           "variant": bool(settings),
           "config": cfg,
           "encoding": cfg["model"]["positional"]["name"],
           "train_loss": ends[-1].get("final_train_loss") if ends else None,
           "valid_loss": best.get("valid_loss") if best else None,
           "valid_accuracy": best.get("valid_accuracy") if best else None,
           "params": ends[-1]["params"] if ends else None,
           "train_minutes": training_minutes(records),
           "tokens_per_sec": statistics.fmean(speeds) if speeds else None,
           "steps": ends[-1]["step"] if ends else None,
           "valid_events": valid}
    scores_path = run_dir / test_dir / "scores.json"
    try:
        scores = json.loads(scores_path.read_text(encoding="utf-8")) if scores_path.is_file() else {}
    except ValueError as e:
        raise CompareError(f"{scores_path} is not readable JSON ({e}); test the run again "
                           f"(python test.py --run {run_dir} --overwrite) or leave it out") from None
    if isinstance(scores.get("decoding"), dict):  # runs decoded differently are different configurations
        cfg["decoding"] = scores["decoding"]
    for key in ("sacrebleu", "chrf", "nltk_bleu4", "sacrebleu_signature", "nltk_tokenization"):
        row[key] = scores.get(key)
    row["longer_bleu"] = (scores.get("longer_than_training") or {}).get("sacrebleu")
    row["by_source_length"] = scores.get("by_source_length")
    row["concat"] = {c["k"]: c for c in scores.get("concat") or []}
    row["teacher_forced"] = run_teacher_forced(scores.get("teacher_forced"))
    return row


def run_variants(run_dir: Path) -> list[tuple[str, dict]]:
    """(folder, settings) of each variant of a run: a test_<name>/ of its own test split scored
    with test-time --set overrides (sweep.py --variant); test_<file>/ of other test sets are not."""
    trained = flatten(to_dict(load_config(run_dir / "config.yaml")))
    variants = []
    for folder in sorted(run_dir.glob("test_*/scores.json")):
        try:
            scores = json.loads(folder.read_text(encoding="utf-8"))
        except ValueError:
            continue  # not readable: not offered as a variant (its own run's scores are checked)
        # what it changed (a sweep's --set that the run was trained with is not a change)
        settings = {k: v for k, v in (scores.get("test_time_overrides") or {}).items() if trained.get(k) != v}
        if scores.get("split") and settings:
            variants.append((folder.parent.name, settings))
    return variants


def run_teacher_forced(report: Optional[dict]) -> Optional[dict]:
    """A run's teacher-forced diagnostic (evaluation/teacher_forced.py) pooled over k = 1 and every
    joined k, token-weighted, EOS renormalised out, boundaries excluded: NLL beyond the decoder's
    training length, NLL per target-position bucket, and p(EOS) at the boundaries per k. None for
    runs tested without it (older runs)."""
    if not isinstance(report, dict) or not report.get("k"):
        return None
    entries = list(report["k"].values())
    buckets: dict[int, tuple[str, list]] = {}
    for e in entries:
        for b in e["buckets"]:
            buckets.setdefault(b["from"], (b["bucket"], []))[1].append(b)
    return {"training_length": (report.get("training_length") or {}).get("target") or None,
            "position_buckets": report.get("position_buckets") or [],
            "nll_beyond": pool_nll(e.get("beyond_training") for e in entries),
            "by_position": [{"bucket": label, "from": lo, "nll_no_eos": pool_nll(bs)}
                            for lo, (label, bs) in sorted(buckets.items())],
            "boundary_p_eos": {k: e["boundary"]["p_eos"] for k, e in sorted(report["k"].items(), key=_k_order)
                               if e.get("boundary")}}


def _k_order(item: tuple[str, dict]) -> int:
    return int(item[0])  # scores.json's k keys are strings: "2" before "10"


# ----------------------------------------------------------------------------- grouping and statistics


def config_label(name: str) -> str:
    """A run name without its seed suffix: demo/rope_seed2 -> demo/rope."""
    return SEED_SUFFIX.sub("", name) or name


def experiment_settings(config: dict) -> dict:
    """A run's resolved config (flattened) without the keys that do not tell configurations apart:
    its seed, name, folder and how it ran (the keys' roles: utils/key_roles.py)."""
    return configuration_settings(flatten(config), config.get("model", {}).get("positional", {}).get("name"))


def group_runs(rows: list[dict]) -> list[dict]:
    """One group per configuration (config equal except seed/name/run_dir), in order of first appearance."""
    groups: dict[str, dict] = {}
    for row in rows:
        key = json.dumps(experiment_settings(row["config"]), sort_keys=True)
        groups.setdefault(key, {"runs": []})["runs"].append(row)
    out = list(groups.values())
    for g in out:
        g["runs"].sort(key=lambda r: (r["seed"] is None, r["seed"] if r["seed"] is not None else 0, r["run"]))
        first = g["runs"][0]
        g.update(label=config_label(first["name"]), encoding=first["encoding"], n=len(g["runs"]),
                 variant=first.get("variant", False),
                 seeds=[r["seed"] for r in g["runs"]], mean={}, std={}, p_value=None, seeds_above=None,
                 is_baseline=False)
        for key in NUMERIC:
            g["mean"][key], g["std"][key], _ = mean_std([r.get(key) for r in g["runs"]])
        g["by_source_length"] = bucket_stats(g["runs"])
        g["teacher_forced"] = teacher_forced_stats(g["runs"])
        g["degradation"] = degradation_stats(g["runs"])
    counts = Counter(g["label"] for g in out)
    for g in out:  # two configurations with one name (e.g. different --set): tell them apart by folder
        if counts[g["label"]] > 1:
            g["label"] = f"{g['label']} ({config_label(g['runs'][0]['run'])})"
    for i, g in enumerate(out):
        if [h["label"] for h in out].count(g["label"]) > 1:
            g["label"] += f" #{i + 1}"
    return out


def bucket_stats(runs: list[dict]) -> Optional[list[dict]]:
    """Mean/std test sacreBLEU per source-length bucket over a group's runs (None if no run has buckets)."""
    with_buckets = [r["by_source_length"] for r in runs if r.get("by_source_length")]
    if not with_buckets:
        return None
    out = []
    for b in with_buckets[0]:
        vals = [next((x["sacrebleu"] for x in bs if x["bucket"] == b["bucket"]), None) for bs in with_buckets]
        mean, std, _ = mean_std(vals)
        out.append({"bucket": b["bucket"], "num_sentences": b["num_sentences"], "mean": mean, "std": std})
    return out


def teacher_forced_stats(runs: list[dict]) -> Optional[dict]:
    """Mean/std over a group's runs of their pooled teacher-forced figures (None if no run has them);
    the training length where the runs agree on it."""
    have = [r for r in runs if r.get("teacher_forced")]
    if not have:
        return None
    tf = [r["teacher_forced"] for r in have]

    def stats(values: list) -> dict:
        return dict(zip(("mean", "std", "n"), mean_std(values)))

    positions = sorted({(b["from"], b["bucket"]) for t in tf for b in t["by_position"]})
    lengths = {t["training_length"] for t in tf}
    ks = sorted({k for t in tf for k in t["boundary_p_eos"]}, key=int)
    return {"runs": len(have), "training_length": lengths.pop() if len(lengths) == 1 else None,
            "nll_beyond": stats([t["nll_beyond"] for t in tf]),
            "by_position": [{"bucket": label, "from": lo, **stats(
                [next((b["nll_no_eos"] for b in t["by_position"] if b["from"] == lo), None) for t in tf])}
                for lo, label in positions],
            "boundary_p_eos": {k: stats([t["boundary_p_eos"].get(k) for t in tf]) for k in ks},
            "per_run": [{"run": r["run"], "seed": r["seed"], **r["teacher_forced"]} for r in have]}


def pick_baseline(groups: list[dict], wanted: Optional[str]) -> dict:
    """The group named `wanted` (label, then encoding); default: the sinusoidal group, else the first."""
    if wanted:
        for field in ("label", "encoding"):
            match = [g for g in groups if g[field] == wanted]
            if match:
                return match[0]
        raise CompareError(f"--baseline {wanted!r} matches no configuration; choose a label "
                           f"({', '.join(g['label'] for g in groups)}) or an encoding "
                           f"({', '.join(sorted({g['encoding'] for g in groups}))})")
    return next((g for g in groups if g["encoding"] == "sinusoidal"), groups[0])


def check_same_references(groups: list[dict]) -> None:
    """Runs scored on different test sets cannot be compared: CompareError naming two of them."""
    refs_by_run = {str(test_folder(r)): read_lines(test_folder(r) / "references.txt") for g in groups for r in g["runs"]}
    have = [(run, refs) for run, refs in refs_by_run.items() if refs is not None]
    for run, refs in have[1:]:
        if refs != have[0][1]:
            raise CompareError(f"test references differ between {have[0][0]} and {run}: runs scored on different "
                               f"test sets cannot be compared (pass --no_significance to tabulate them anyway)")


def add_significance(groups: list[dict], baseline: dict, findings: dict) -> None:
    """Each group's p vs the baseline on the test set and per k: the findings' p over all shared
    seeds, so that one comparison has one p wherever it is printed (k = 1 is the test set)."""
    for g in groups:
        if g is baseline:
            continue
        row = find_row(findings, "test", g["label"], "test set")
        g["p_value"] = row["p_value"] if row else None
        for k, c in (g.get("concat") or {}).items():
            row = find_row(findings, "test", g["label"], "test set") if k == 1 else \
                find_row(findings, "concat", g["label"], f"k={k}")
            c["p_value"] = row["p_value"] if row else None


def add_seed_wins(groups: list[dict], baseline: dict, margin: float = 0.0) -> None:
    """Set each group's `seeds_above` = [wins, pairs]: over the seeds it shares with the baseline,
    how many of its runs have a higher test sacreBLEU than the baseline's run with the same seed
    (None when no seed is shared or no run is scored)."""
    for g in groups:
        if g is not baseline:
            g["seeds_above"] = seed_wins(g["runs"], baseline["runs"], lambda r: r.get("sacrebleu"), margin)


# ----------------------------------------------------------------------------- command line


def output_prefix(text: str) -> Path:
    """--output as a prefix: `runs/x/summary` (a `.md`/`.csv`/`.json` ending is dropped); a dot in
    the name (`v1.2`) stays part of it."""
    out = Path(text)
    return out.with_suffix("") if out.suffix in (".md", ".csv", ".json") else out


def named(prefix: Path, suffix: str) -> Path:
    return prefix.with_name(prefix.name + suffix)


def is_compare_report(path: Path) -> bool:
    """An earlier summary of compare.py (its JSON), which a new one with the same prefix may replace."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and {"baseline", "significance", "groups"} <= set(report)


def main(argv: Optional[list[str]] = None) -> int:
    parser = command_parser(__doc__, output="path prefix: writes <prefix>.md, .csv, .json, <prefix>_findings.md/.json, "
                                            "<prefix>_headline.md (the result sentences) and <prefix>_*.png plots",
                            overwrite="let --output replace files that are not an earlier summary of compare.py")
    parser.add_argument("runs", nargs="+", help="run folders or glob patterns (quote them)")
    parser.add_argument("--baseline", metavar="NAME_OR_ENCODING",
                        help="configuration the others are tested against: a config label or an encoding "
                             "(default: the sinusoidal configuration if present, else the first)")
    parser.add_argument("--family", metavar="YAML",
                        help="the study's declared headline comparisons (e.g. configs/length/findings/headline.yaml): only "
                             "these can be worded ahead/behind, with Holm's correction over them; also its "
                             "baseline and tie margins (default: none declared, every finding descriptive)")
    parser.add_argument("--bootstrap_samples", type=int, default=10000,
                        help="paired bootstrap resamples (10,000: a p-value's standard error is at most 0.005)")
    parser.add_argument("--no_significance", action="store_true",
                        help="skip the paired bootstrap test (and the same-references check)")
    args = parser.parse_args(argv)
    if args.bootstrap_samples < 1:
        raise CompareError(f"--bootstrap_samples must be at least 1, got {args.bootstrap_samples}")
    paths: list[Path] = []
    for pattern in args.runs:
        matches = sorted(glob.glob(pattern)) or [pattern]
        paths += [Path(m) for m in matches]
    seen: set = set()
    rows = []
    for p in paths:
        if p.is_dir() and p.resolve() not in seen and (row := summarise_run(p)) is not None:
            seen.add(p.resolve())
            rows.append(row)
            rows += [summarise_run(p, variant) for variant in run_variants(p)]
    if not rows:
        raise CompareError(f"no run folders (with config.yaml) among {', '.join(args.runs)}")
    family = load_family(args.family)
    margin = family.tie_margin["sacreBLEU"]
    try:
        groups = group_runs(rows)  # reads each run's per-pair sums: a damaged file is a one-line error
        baseline = pick_baseline(groups, args.baseline or family.baseline)
        baseline["is_baseline"] = True
        add_seed_wins(groups, baseline, margin)
        add_concat_stats(groups, baseline, check_inputs=not args.no_significance, margin=margin)
        findings = None
        if not args.no_significance:
            check_same_references(groups)
            findings = compute_findings(groups, baseline, args.bootstrap_samples, family=family)
            add_significance(groups, baseline, findings)
    except ValueError as e:  # references that differ between runs, a damaged per-run file
        raise CompareError(str(e)) from None
    table = markdown_table(groups, baseline, args.bootstrap_samples)
    degradation = degradation_table(groups)  # the length study's headline measure: its first table
    if degradation:
        table = degradation + "\n\n" + table
    for extra in (bucket_table(groups), concat_tables(groups, baseline, args.bootstrap_samples),
                  teacher_forced_tables(groups)):
        if extra:
            table += "\n\n" + extra
    print(table)
    if findings is not None:
        print("\n" + findings_markdown(findings))
    if args.output:
        out = output_prefix(args.output)
        texts = {named(out, ".md"): table + "\n",
                 named(out, ".json"): json.dumps(json_report(groups, baseline, args.bootstrap_samples),
                                                 indent=2) + "\n"}
        fields, csv_data = csv_rows(groups)
        with io.StringIO() as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(csv_data)
            texts[named(out, ".csv")] = f.getvalue()
        if findings is not None:
            texts[named(out, "_findings.md")] = findings_markdown(findings) + "\n"
            texts[named(out, "_findings.json")] = json.dumps(findings, indent=2) + "\n"
            texts[named(out, "_headline.md")] = headline_markdown(findings) + "\n"
        # its own earlier summary (the same prefix) is replaced; anything else needs --overwrite
        own = is_compare_report(named(out, ".json"))
        for path in texts:
            check_target(path, "--output", overwrite=args.overwrite or own)
        for path, text in texts.items():
            atomic_write_text(path, text)
        written = list(texts) + write_plots(groups, out)
        print("\nwrote " + ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
