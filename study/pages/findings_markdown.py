"""The findings as markdown (`<prefix>_findings.md`): each declared comparison in full, one table
per measure with its smallest detectable effect, then how the rows were computed."""

from __future__ import annotations

from typing import Optional

from study.judge.design import FIXED, Design, design_of
from study.judge.wording import fmt_number, format_alpha, format_p, unit_of
from study.pages.headline import compared_on, sentences_markdown
from study.records import ComparisonRow, Findings, FindingsTable
from study.terms import Measure
from utils.markdown import table_head, table_row

SEQUENTIAL_CELL = "– (sequential)"


def equivalence_cell(r: ComparisonRow, metric: str, design: Design = FIXED) -> str:
    """A declared row's equivalence test: its Holm p, the power to show ±m if the true difference were
    0, the seeds 80% power would need ('–' for a row that is not declared or a study without a margin);
    a row decided at a sequential plan's looks: its p against its boundary there, no fixed-design power."""
    at_look = design.equivalence_cell(r)
    if at_look is not None:
        return at_look
    if r.reading is None or r.reading.p_equivalence is None:
        return "–"
    equivalence_power, seeds = (r.power.equivalence_power, r.power.seeds_for_equivalence) if r.power else (None, None)
    need = f"{seeds} seeds for 80%" if seeds else "out of reach at any seed count"
    power = f"power {equivalence_power:.0%} if the true difference were 0" if equivalence_power is not None else ""
    return f"Holm p {format_p(r.reading.p_equivalence_holm)}; {power}; {need}"


def detectable_cell(r: ComparisonRow, metric: str, design: Design = FIXED) -> str:
    """The smallest true difference this row's seeds find 80% of the time; the seeds for the declared effect
    (a fixed design's figures: none for a row decided at a sequential plan's looks)."""
    if not design.fixed_figures(r):
        return SEQUENTIAL_CELL
    if r.power is None:
        return "–"
    need = r.power.seeds_needed
    return f"{fmt_number(r.power.detectable, metric).lstrip('+')} ({need or '∞'} seeds for the declared effect)"


def _decision_cells(r: ComparisonRow, metric: str, design: Design, claim: Optional[ComparisonRow]) -> list[str]:
    """A row's decision, equivalence and detectable-Δ cells; a set's row of a declared claim across test
    sets (`claim`: the claim's declared row): part of that claim, with its design's figures."""
    if claim is None:
        return [design.table_p_cell(r), equivalence_cell(r, metric, design), detectable_cell(r, metric, design)]
    return [
        f"in the declared claim across the test sets (its `{compared_on(claim)}` row)",
        equivalence_cell(r, metric, design),
        detectable_cell(r, metric, design) if design.fixed_figures(claim) else SEQUENTIAL_CELL,
    ]


def table_markdown(t: FindingsTable, findings: Findings) -> str:
    """One findings table: a row per comparison, then the α its detectable effects are at."""
    design = design_of(findings)
    metric = t.metric
    margins = findings.equivalence_margin
    lower = " (lower is better)" if Measure(metric).lower_is_better else ""
    seed_p_title = (
        "sacreBLEU's paired bootstrap p per seed (one tail, model fixed)"
        if metric == Measure.SACREBLEU
        else "p per seed: sacreBLEU's paired bootstrap on the NLL (one tail, model fixed)"
    )
    unit = unit_of(metric)
    within = f"±{fmt_number(margins[metric], metric).lstrip('+')} {unit}" if metric in margins else "no margin"
    exploratory = findings.exploratory_rule
    lines = [
        f"Against `{findings.baseline}`, {t.title}:",
        "",
        *table_head(
            [
                "config",
                "compared on",
                f"Δ {metric}{lower}, mean over seeds",
                "Δ per seed",
                "p against no difference (two-sided, unadjusted)",
                design.p_column(findings.decision_rule.name),
                f"equivalent within {within} (declared)",
                "detectable Δ, 80% power",
                seed_p_title,
                "finding",
                *([f"exploratory finding (rule `{exploratory.name}`)"] if exploratory else []),
            ]
        ),
    ]
    # a set's row of a declared claim across test sets is part of that claim, its figures the claim's design's
    claims = {s.key(r.key): r for r in t.rows if r.declared for s in r.sets if not s.own}
    for r in t.rows:
        per_seed = ", ".join(f"{s.seed}: {fmt_number(s.difference, metric)}" for s in r.per_seed)
        seed_p = ", ".join(f"{s.seed}: {format_p(s.p_value)}" for s in r.per_seed)
        other = [r.exploratory.finding if r.exploratory else "–"] if exploratory else []
        cells = [format_p(r.p_value), *_decision_cells(r, metric, design, claims.get(r.key))]
        lines.append(
            table_row(
                [r.config, f"{compared_on(r)} (n={r.num_sentences})", fmt_number(r.mean_difference, metric)]
                + [per_seed or "–", *cells, seed_p or "–", r.finding, *other]
            )
        )
    if t.alpha is not None:
        note = f"Detectable Δ and the seeds for the declared effect at two-sided α = {format_alpha(t.alpha)}."
        if any(not design.fixed_figures(r) for r in t.rows):
            note += (
                f" {SEQUENTIAL_CELL}: a row decided at the sequential plan's looks has no fixed-design figure "
                "(the plan's power and expected seeds are simulated: study/simulate/sequential_calibration.py)."
            )
        lines += ["", note]
    return "\n".join(lines)


def method_markdown(findings: Findings) -> str:
    margins = findings.equivalence_margin
    family = (
        f"the headline family declared in `{findings.family}` ({findings.family_size} comparisons)"
        if findings.family
        else "no declared headline family (every row is descriptive)"
    )
    tie = ", ".join(f"{v:g} {unit_of(k)}" for k, v in findings.tie_margin.items())
    equivalence = (
        f" Equivalence: {findings.equivalence_test}; margins "
        + ", ".join(f"±{v:g} {unit_of(k)}" for k, v in margins.items())
        + ". The power of equivalence is the power to show ±m if the true difference were 0, at Holm's first step."
        if margins
        else ""
    )
    rule = findings.decision_rule
    exploratory = findings.exploratory_rule
    rules = f" Decision rule `{rule.name}` (the family's): {rule.text}." if findings.family else ""
    rules += design_of(findings).plan_paragraph()
    if exploratory:
        rules += (
            f" Exploratory finding: rule `{exploratory.name}` ({exploratory.text}), read after these runs "
            "(the rule changed after them); it does not replace the declared finding."
        )
    return (
        f"p against no difference and the 95% interval: {findings.test}; {findings.n_samples:,} bootstrap "
        f"resamples (seed {findings.bootstrap_seed}); assumes independent, roughly normal seed effects (Dror et "
        f"al. 2018). The interval is per row, not Holm-adjusted. Holm's correction runs over {family}.{rules}"
        f"{equivalence} Detectable Δ: the smallest true difference the current rule words as a direction 80% of "
        f"the time at Holm's first step (two-sided, beyond the tie margin). Tie margin: {tie} (the smallest mean "
        f"difference worth a direction). p per seed: "
        f"{findings.descriptive_p} (for NLL the same resampling of its units). The NLL tables resample "
        f"test pairs (degradation) or inputs (absolute NLL beyond training). {findings.rule}"
    )


def findings_markdown(findings: Findings) -> str:
    """Whether the study is interim, the rows in full, a table per measure, then how they were computed."""
    parts = design_of(findings).interim_paragraph(findings.interim, findings.family)
    sentences = sentences_markdown(findings)
    if sentences:
        parts.append(
            ("Declared comparisons, in full:" if findings.family else "Test-set rows, in full:") + "\n\n" + sentences
        )
    parts += [table_markdown(t, findings) for t in findings.tables]
    parts.append(method_markdown(findings))
    return "\n\n".join(parts)
