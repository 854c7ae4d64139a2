"""The sentences a study's results section states, generated from its findings by a few fixed
templates (compare.py writes them as <prefix>_headline.md; the README copies the file verbatim):
what the declared family supports, each declared comparison as a sentence, and the smallest effect
each table's seeds can see. No result sentence of the README is written by hand."""

from __future__ import annotations

from evaluation.seed_test import fmt_number, format_p, unit_of

SHORT_TITLES = {
    "degradation": "degradation (NLL joined minus alone)",
    "test": "test set",
    "concat": "joined inputs",
    "buckets": "test set by source length",
    "teacher_forced": "absolute NLL beyond training",
}  # the table a sentence speaks of


def _row_sentence(r: dict, metric: str, baseline: str) -> str:
    n = len(r["per_seed"])
    lower = " (lower is better)" if metric == "NLL" else ""
    return (
        f"- `{r['config']}` against `{baseline}`, {r['compared_on']}: mean difference "
        f"{fmt_number(r['mean_difference'], metric)} {unit_of(metric)}{lower} over {n} seed{'s' if n != 1 else ''}"
        + (f", p {format_p(r['p_value'])}" if r["p_value"] is not None else "")
        + f" — {r['finding']}."
    )


def headline_markdown(findings: dict) -> str:
    """The study's result sentences: the declared family's verdict count and rows (or, without a
    family, the test-set rows), then one power sentence per table."""
    baseline = findings["baseline"]
    tables = findings["tables"]
    declared = [(t, r) for t in tables for r in t["rows"] if r.get("declared")]
    lines = []
    if findings.get("family"):
        worded = sum(r["finding"].startswith(("ahead", "behind")) for _, r in declared)
        lines.append(
            f"- Declared headline family (`{findings['family']}`): {findings['family_size']} comparisons "
            f"against `{baseline}`, Holm-corrected over the family; {worded} of them "
            f"{'is' if worded == 1 else 'are'} worded as a direction, the others are descriptive."
        )
        shown = declared
    else:
        lines.append(f"- No declared headline family: every comparison against `{baseline}` is descriptive.")
        shown = [(t, r) for t in tables if t["name"] == "test" for r in t["rows"]]
    lines += [_row_sentence(r, t["metric"], baseline) for t, r in shown if r.get("mean_difference") is not None]
    # one sentence: the smallest effect the most-seeded rows can see, on each table the headline reads
    read = {t["name"] for t, _ in shown}
    parts, alpha = [], None
    for t in tables:
        if t["name"] in read and t.get("power"):
            pw = t["power"][0]  # the most seeds
            alpha = pw["alpha"]
            parts.append(
                f"{fmt_number(pw['detectable'], t['metric']).lstrip('+')} {unit_of(t['metric'])} on the "
                f"{SHORT_TITLES.get(t['name'], t['name'])} ({pw['n']} seeds)"
            )
    if parts:
        lines.append(
            f"- The smallest true difference the seeds find 80% of the time (two-sided α = {alpha:.2g}): "
            + ", ".join(parts)
            + " (each findings table says more, and how many seeds a smaller one "
            "would need)."
        )
    elif shown and all(len(r["per_seed"]) <= 1 for _, r in shown):
        lines.append("- One seed per configuration: no test and no detectable effect; every row is that trained model.")
    return "\n".join(lines)
