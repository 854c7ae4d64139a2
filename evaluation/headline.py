"""The sentences a study's results section states, generated from its findings by a few fixed
templates (compare.py writes them as <prefix>_headline.md; the README copies the file verbatim):
whether the study is interim, what the declared family supports, and each declared comparison as a
sentence with its p (unadjusted and Holm) and the smallest effect its seeds can see. No result
sentence of the README is written by hand."""

from __future__ import annotations

from evaluation.seed_test import fmt_number, format_p, unit_of


def _p_text(r: dict) -> str:
    """The row's p, labelled: unadjusted, beside the Holm-adjusted p of a declared row."""
    if r["p_value"] is None:
        return ""
    holm = f"Holm {format_p(r['p_holm'])}" if r.get("declared") and r.get("p_holm") is not None else "not declared"
    return f", p {format_p(r['p_value'])} (unadjusted; {holm})"


def _power_text(r: dict, metric: str, alpha: float) -> str:
    """What the row's seeds can see (at their seed SD as estimated, n - 1 degrees of freedom): the
    smallest true difference found 80% of the time at two-sided `alpha` (Holm's first step); for a
    declared row with a margin, the power of showing equivalence and the seeds that would need."""
    if r.get("detectable") is None:
        return ""
    size = f"{fmt_number(r['detectable'], metric).lstrip('+')} {unit_of(metric)}"
    text = f"; detectable {size} at 80% power (two-sided α {alpha:.2g})"
    if r.get("equivalence_power") is not None:
        seeds = r.get("seeds_for_equivalence")
        reach = f"{seeds} seeds for 80%" if seeds else "out of reach"
        text += f", equivalence power {r['equivalence_power']:.0%} ({reach})"
    return text


def _row_sentence(r: dict, metric: str, baseline: str, alpha: float) -> str:
    n = len(r["per_seed"])
    lower = " (lower is better)" if metric == "NLL" else ""
    return (
        f"- `{r['config']}` against `{baseline}`, {r['compared_on']}: mean difference "
        f"{fmt_number(r['mean_difference'], metric)} {unit_of(metric)}{lower} over {n} seed{'s' if n != 1 else ''}"
        + _p_text(r)
        + _power_text(r, metric, alpha)
        + f" — {r['finding']}."
    )


def headline_markdown(findings: dict) -> str:
    """The study's result sentences: whether the study is interim, the declared family's verdict
    count, then each declared row (or, without a family, the test-set rows) with its p (unadjusted
    and Holm), what its seeds can detect and its finding."""
    baseline = findings["baseline"]
    tables = findings["tables"]
    declared = [(t, r) for t in tables for r in t["rows"] if r.get("declared")]
    lines = []
    plan = findings.get("interim")
    if plan:
        lines.append(
            f"- **Interim: {plan['seeds']} of {plan['planned']} planned seeds.** No comparison of the declared "
            "family is worded as a direction or as equivalent until every planned seed is in."
        )
    if findings.get("family"):
        said = [r.get("outcome") for _, r in declared]
        lines.append(
            f"- Declared headline family (`{findings['family']}`): {findings['family_size']} comparisons "
            f"against `{baseline}`, Holm-corrected over the family (and, apart, over their equivalence tests): "
            f"{said.count('direction')} worded as a direction, {said.count('equivalent')} as equivalent, "
            f"{said.count('both')} as both, {said.count('inconclusive')} inconclusive, the others without a verdict."
        )
        shown = declared
    else:
        lines.append(f"- No declared headline family: every comparison against `{baseline}` is descriptive.")
        shown = [(t, r) for t in tables if t["name"] == "test" for r in t["rows"]]
    lines += [
        _row_sentence(r, t["metric"], baseline, t.get("alpha") or 0.05)
        for t, r in shown
        if r.get("mean_difference") is not None
    ]
    if shown and all(len(r["per_seed"]) <= 1 for _, r in shown):
        lines.append("- One seed per configuration: no test and no detectable effect; every row is that trained model.")
    return "\n".join(lines)
