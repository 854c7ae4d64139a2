"""compare.py's tables: the main table (one row per configuration, mean ± std over its seeds, the
p-value and same-seed wins against the baseline), scores per source-length bucket, and the same
numbers as CSV rows and a JSON report. Input: compare.py's groups (one per configuration, with its
runs); the per-k tables of the length protocol are in evaluation/length_report.py."""

from __future__ import annotations

from typing import Optional

from evaluation.findings import format_p

# numeric columns: key -> table title (means and stds over a configuration's seeds)
NUMERIC = {
    "train_loss": "train loss", "valid_loss": "valid loss", "valid_accuracy": "valid acc",
    "sacrebleu": "test sacreBLEU", "chrf": "test chrF", "nltk_bleu4": "test nltk BLEU-4",
    "longer_bleu": "BLEU longer-than-training", "params": "params", "train_minutes": "train min",
    "tokens_per_sec": "tgt tokens/s", "steps": "steps",
}
COLUMNS = [("label", "config"), ("encoding", "encoding"), ("n", "seeds"), *NUMERIC.items(),
           ("p_value", "p vs baseline"), ("seeds_above", "seeds above baseline")]
CONCAT_CSV = ("bleu", "bleu_std", "ratio", "ratio_std", "p_value")


def fmt(key: str, value) -> str:
    if value is None:
        return "–"
    if key in ("train_loss", "valid_loss", "nltk_bleu4", "valid_accuracy"):
        return f"{value:.4f}"
    if key in ("sacrebleu", "chrf", "longer_bleu"):
        return f"{value:.2f}"
    if key == "train_minutes":
        return f"{value:.1f}"
    if key in ("tokens_per_sec", "steps"):
        return f"{value:.0f}"
    if key == "params":
        return f"{value / 1e6:.2f}M"
    if key == "p_value":
        return format_p(value)
    if key == "seeds_above":
        return f"{value[0]}/{value[1]}"
    return str(value)


def cell(key: str, mean, std) -> str:
    if std is None or mean is None or (std == 0 and key in ("params", "steps")):  # same model size/length
        return fmt(key, mean)
    return f"{fmt(key, mean)} ± {fmt(key, std)}"


def markdown_table(groups: list[dict], baseline: Optional[dict] = None, n_samples: int = 1000) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for g in groups:
        cells = [g["label"], g["encoding"], str(g["n"])]
        cells += [cell(k, g["mean"][k], g["std"][k]) for k in NUMERIC]
        cells.append("baseline" if g["is_baseline"] else fmt("p_value", g["p_value"]))
        cells.append("baseline" if g["is_baseline"] else fmt("seeds_above", g["seeds_above"]))
        lines.append("| " + " | ".join(cells) + " |")
    runs = [r for g in groups for r in g["runs"]]
    lines.append("")
    if any(g["n"] > 1 for g in groups):
        lines.append("Figures are mean ± sample standard deviation over a configuration's seeds (`seeds`).")
    if baseline is not None and any(g["p_value"] is not None for g in groups):
        lines.append(f"p vs baseline: paired bootstrap resampling of test sacreBLEU ({n_samples:,} resamples) against "
                     f"`{baseline['label']}` over the seeds both were run with, the same resampled sentences for "
                     f"every seed (one seed: sacreBLEU's own test); uncorrected — the findings give each seed's p, "
                     f"Holm's correction and what the comparison supports.")
    if baseline is not None and any(g["seeds_above"] is not None for g in groups):
        lines.append(f"seeds above baseline: runs whose test sacreBLEU beat `{baseline['label']}` run with the "
                     f"same seed, out of the seeds both were run with; a seed moves every configuration, so this "
                     f"is the check that a difference is not seed noise.")
    signatures = sorted({r["sacrebleu_signature"] for r in runs if r.get("sacrebleu_signature")})
    if signatures:
        lines.append("sacreBLEU signature: " + "; ".join(f"`{s}`" for s in signatures))
    tokenizations = sorted({r["nltk_tokenization"] for r in runs if r.get("nltk_tokenization")})
    if tokenizations:
        lines.append("nltk BLEU-4 is corpus BLEU on word tokens (" + "; ".join(tokenizations) + "), in [0, 1].")
    return "\n".join(lines).rstrip()


def bucket_table(groups: list[dict]) -> str:
    """Test sacreBLEU per source-length bucket (subword tokens), one row per configuration; empty if none."""
    rows = [g for g in groups if g["by_source_length"]]
    if not rows:
        return ""
    labels = [b["bucket"] for b in rows[0]["by_source_length"]]
    counts = {b["bucket"]: b["num_sentences"] for b in rows[0]["by_source_length"]}
    lines = ["| config | encoding | " + " | ".join(f"{lab} (n={counts[lab]})" for lab in labels) + " |",
             "|---|---|" + "|".join("---" for _ in labels) + "|"]
    for g in rows:
        by = {b["bucket"]: b for b in g["by_source_length"]}
        lines.append(f"| {g['label']} | {g['encoding']} | " + " | ".join(
            cell("sacrebleu", by[lab]["mean"], by[lab]["std"]) if lab in by else "–" for lab in labels) + " |")
    return "Test sacreBLEU by source length (subword tokens):\n\n" + "\n".join(lines)


def csv_rows(groups: list[dict]) -> tuple[list[str], list[dict]]:
    fields = ["label", "encoding", "n"] + [f for k in NUMERIC for f in (k, f"{k}_std")] + \
             ["p_value", "seeds_above", "seeds_compared", "is_baseline", "runs", "sacrebleu_signature"]
    rows = []
    for g in groups:
        wins = g["seeds_above"]
        row = {"label": g["label"], "encoding": g["encoding"], "n": g["n"], "p_value": g["p_value"],
               "seeds_above": wins[0] if wins else None, "seeds_compared": wins[1] if wins else None,
               "is_baseline": g["is_baseline"], "runs": ";".join(r["run"] for r in g["runs"]),
               "sacrebleu_signature": g["runs"][0].get("sacrebleu_signature")}
        for k in NUMERIC:
            row[k], row[f"{k}_std"] = g["mean"][k], g["std"][k]
        for k, c in (g.get("concat") or {}).items():  # the length protocol, one set of columns per k
            row.update({f"k{k}_{key}": c[key] for key in CONCAT_CSV})
        rows.append(row)
    ks = sorted({k for g in groups for k in (g.get("concat") or {})})
    return fields + [f"k{k}_{key}" for k in ks for key in CONCAT_CSV], rows


def json_report(groups: list[dict], baseline: Optional[dict], n_samples: int) -> dict:
    per_run = ("run", "seed", *NUMERIC)
    return {
        "baseline": baseline["label"] if baseline else None,
        "significance": {"test": "paired bootstrap resampling, one test over the seeds both ran (see *_findings.json)",
                         "metric": "sacreBLEU", "n_samples": n_samples},
        "groups": [{"label": g["label"], "encoding": g["encoding"], "n": g["n"], "seeds": g["seeds"],
                    "runs": [r["run"] for r in g["runs"]], "mean": g["mean"], "std": g["std"],
                    "p_value": g["p_value"], "seeds_above": g["seeds_above"], "is_baseline": g["is_baseline"],
                    "by_source_length": g["by_source_length"], "concat": g.get("concat") or None,
                    "per_run": [{k: r.get(k) for k in per_run} for r in g["runs"]]} for g in groups],
    }
