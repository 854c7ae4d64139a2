"""The findings as markdown (`<prefix>_findings.md`): one table per measure with its smallest
detectable effect, then how the rows were computed."""

from __future__ import annotations

from evaluation.seed_test import fmt_number, format_p, unit_of


def power_sentence(t: dict, unit: str) -> str:
    if not t.get("power"):
        return "Smallest detectable effect: needs two seeds or more."
    metric = t["metric"]
    parts = []
    for pw in t["power"]:
        effect = f"{fmt_number(pw['effect'], metric).lstrip('+')} {unit}"
        reach = (
            f"a true difference of {effect} would need {pw['seeds_needed']} seeds"
            if pw["seeds_needed"]
            else f"a true difference of {effect} is out of reach at any number of seeds (the test set's noise "
            f"that every seed shares is larger)"
        )
        parts.append(
            f"with {pw['n']} seeds ({pw['rows']} rows; median SE {pw['se']:.3g} {unit}: seed SD "
            f"{pw['seed_sd']:.3g}, test-set SD {pw['v_sent'] ** 0.5:.3g}) "
            f"{fmt_number(pw['detectable'], metric).lstrip('+')} {unit}, and {reach}"
        )
    return (
        f"Smallest effect these seeds can see (80% power, two-sided α = {t['power'][0]['alpha']:.2g}): "
        + "; ".join(parts)
        + "."
    )


def findings_markdown(findings: dict) -> str:
    """The findings as markdown: one table per measure, its smallest detectable effect, then how they were computed."""
    parts = []
    for t in findings["tables"]:
        metric = t["metric"]
        unit = unit_of(metric)
        lower = " (lower is better)" if metric == "NLL" else ""
        seed_p_title = (
            "sacreBLEU's paired bootstrap p per seed (one tail, model fixed)"
            if metric == "sacreBLEU"
            else "p per seed: sacreBLEU's paired bootstrap on the NLL (one tail, model fixed)"
        )
        lines = [
            f"Against `{findings['baseline']}`, {t['title']}:",
            "",
            f"| config | compared on | Δ {metric}{lower}, mean over seeds | Δ per seed | "
            f"p, seeds (two-sided) | p, Holm (declared) | {seed_p_title} | finding |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in t["rows"]:
            per_seed = ", ".join(f"{s['seed']}: {fmt_number(s['difference'], metric)}" for s in r["per_seed"])
            seed_p = ", ".join(f"{s['seed']}: {format_p(s['p_value'])}" for s in r["per_seed"])
            holm_p = format_p(r["p_holm"]) if r.get("declared") else "not declared"
            lines.append(
                f"| {r['config']} | {r['compared_on']} (n={r['num_sentences']}) | "
                f"{fmt_number(r['mean_difference'], metric)} | {per_seed or '–'} | "
                f"{format_p(r['p_value'])} | {holm_p} | {seed_p or '–'} | {r['finding']} |"
            )
        lines += ["", power_sentence(t, unit)]
        parts.append("\n".join(lines))
    family = (
        f"the headline family declared in `{findings['family']}` ({findings['family_size']} comparisons)"
        if findings.get("family")
        else "no declared headline family (every row is descriptive)"
    )
    margins = ", ".join(f"{v:g} {unit_of(k)}" for k, v in findings["tie_margin"].items())
    parts.append(
        f"p, seeds: {findings['test']}; {findings['n_samples']:,} bootstrap resamples (seed "
        f"{findings['bootstrap_seed']}); assumes independent, roughly normal seed effects (Dror et al. 2018). "
        f"The interval is per row, not Holm-adjusted. Holm's correction runs over {family}. Tie margin: "
        f"{margins} (a seed closer to the baseline is a tie, never a win). p per seed: "
        f"{findings['descriptive_p']} (for NLL the same resampling of its units). The NLL tables resample "
        f"test pairs (degradation) or inputs (absolute NLL beyond training). {findings['rule']}"
    )
    return "\n\n".join(parts)
