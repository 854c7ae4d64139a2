"""What a study's results say, generated from its findings by fixed templates (no result sentence of
the README is written by hand):

- `headline_markdown`: the table a reader takes in at a glance (compare.py writes it as
  <prefix>_headline.md; the README and the study page copy it verbatim): one row per declared
  comparison with its mean difference and 95% interval, the seeds that way, the Holm p and the
  verdict (declared; the current rule's exploratory reading where it differs);
- `sentences_markdown`: each declared comparison in full, with its p (unadjusted and Holm) and what
  its seeds can detect (the top of <prefix>_findings.md, on the study page).

Terms (family, declared, tie margin, Holm, TOST, exploratory) are defined in results/README.md."""

from __future__ import annotations

from typing import Optional

from study.judge.wording import (
    direction_words,
    fmt_number,
    format_p,
    seed_signs,
    unit_of,
    withheld_reason,
    within_words,
)
from study.records import ComparisonRow, Findings, FindingsTable, LookPlan, Reading
from study.stats.sequential import spending_text
from study.terms import Measure, Outcome, Table
from utils.markdown import table_head, table_row


def short_verdict(
    reading: Optional[Reading], row: ComparisonRow, metric: str, margin: float, equivalence: Optional[float]
) -> str:
    """A reading's verdict in a few words: the direction (study/judge/wording.py's words), 'equivalent
    within ±m', both, 'inconclusive', 'interim' or why it is withheld, 'descriptive'."""
    said = reading.outcome if reading is not None else None
    within = f"equivalent within {within_words(equivalence, metric)}"
    if said in (Outcome.DIRECTION, Outcome.BOTH):
        direction = direction_words(row, reading, metric, margin)
        return direction if said == Outcome.DIRECTION else f"{direction} and {within}"
    if said == Outcome.EQUIVALENT:
        return within
    if said == Outcome.WITHHELD and row.look is not None and row.from_declaring_commit:  # a sequential plan's
        return "no verdict before the first look" if row.look.look == 0 else f"open until look {row.look.look + 1}"
    if said == Outcome.WITHHELD:
        return withheld_reason(reading.withheld)
    return str(said or Outcome.DESCRIPTIVE)


def _interval(r: ComparisonRow, metric: str) -> str:
    """Δ [its 95% interval]: a sequential family's row at a look, the repeated one."""
    t = r.seed_test
    mean = fmt_number(r.mean_difference, metric)
    if t.low is None:
        return mean
    low, high = (r.look.repeated_low, r.look.repeated_high) if r.look and r.look.look else (t.low, t.high)
    return f"{mean} [{fmt_number(low, metric)}, {fmt_number(high, metric)}]"


def look_cell(r: ComparisonRow) -> str:
    """Where a sequential family's declared row stands: the look that decided it and its seeds, the
    look it is open after, or the first look it waits for."""
    look = r.look
    if look.look == 0:
        return f"before look 1 ({look.seeds} of {look.next_seeds} seeds)"
    at = f"look {look.look} of {look.looks} ({look.seeds} seeds)"
    if look.decided:
        return at
    return f"{at}, undecided" if look.last else f"open after {at}"


def _seeds_that_way(r: ComparisonRow, metric: str, margin: float) -> str:
    """'k of n' seeds beyond the tie margin on the side of the mean (descriptive, never a veto)."""
    diffs = r.differences
    above, below, _ = seed_signs(diffs, margin)
    up = r.mean_difference > 0
    m = fmt_number(margin, metric).lstrip("+")
    return f"{above if up else below} of {len(diffs)} {'above +' if up else 'below -'}{m}"


def _table_row(t: FindingsTable, r: ComparisonRow, findings: Findings, exploratory: bool) -> str:
    metric = t.metric
    margin = findings.tie_margin[metric]
    equivalence = findings.equivalence_margin.get(metric)
    lower = ", lower is better" if Measure(metric).lower_is_better else ""
    holm = format_p(r.p_holm) if r.declared else "not declared"
    if findings.sequential is not None:
        holm = look_cell(r) if r.look is not None else "not declared"
    cells = [
        f"`{r.config}`",
        f"{r.compared_on} ({unit_of(metric)}{lower})",
        _interval(r, metric),
        _seeds_that_way(r, metric, margin),
        holm,
        short_verdict(r.reading, r, metric, margin, equivalence),
    ]
    if exploratory:
        other = r.exploratory
        if other is None:
            cells.append("–")
        else:
            same = other.outcome == r.outcome  # a direction's sign is the mean's under both
            cells.append("same verdict" if same else _exploratory_cell(other, r, metric, margin, equivalence))
    return table_row(cells)


def _exploratory_cell(
    other: Reading, r: ComparisonRow, metric: str, margin: float, equivalence: Optional[float]
) -> str:
    """The current rule's verdict with the Holm p it rests on (both p for 'both', both for neither)."""
    said = short_verdict(other, r, metric, margin, equivalence)
    holm = f"Holm p {format_p(other.p_holm)}"
    equal = f"equivalence Holm p {format_p(other.p_equivalence_holm)}"
    outcome = other.outcome
    ps = holm if outcome == Outcome.DIRECTION else equal if outcome == Outcome.EQUIVALENT else f"{holm}, {equal}"
    return f"{said} ({ps})"


def _family_line(findings: Findings, declared: list) -> str:
    counts = [r.outcome for _, r in declared]
    said = {k: counts.count(k) for k in Outcome if k.worded}
    rest = len(counts) - sum(said.values())
    counted = ", ".join(f"{n} {'directions' if k == Outcome.DIRECTION and n != 1 else k}" for k, n in said.items())
    withheld = f", {rest} without a verdict (interim or not from the declaring commit)" if rest else ""
    how = "with Holm's correction over the family"
    plan = findings.sequential
    if plan is not None:
        spent = spending_text(plan.spending, plan.spending_equivalence)
        how = (
            f"look by look (at {', '.join(map(str, plan.looks))} seeds): Holm's procedure as a graph across the "
            f"comparisons, α spent across the looks by Lan–DeMets spending of the {spent} type (Maurer & Bretz 2013)"
        )
        withheld = (f", {rest} without a verdict yet" if rest else "") + f"; {_where_it_stands(plan)}"
    return (
        f"Declared family `{findings.family}`: {findings.family_size} comparisons against "
        f"`{findings.baseline}`, decided by rule `{findings.decision_rule.name}` {how}: "
        f"{counted}{withheld}."
    )


def _where_it_stands(plan: LookPlan) -> str:
    """A sequential study's state: stopped at a look (and why), or the look it waits for."""
    if plan.stopped:
        why = "the last look" if plan.taken == len(plan.looks) else "every comparison decided"
        beyond = f"; seeds archived beyond it, not counted: {', '.join(map(str, plan.not_counted))}"
        at = f"look {plan.taken} of {len(plan.looks)} ({plan.looks[plan.taken - 1]} seeds, {why})"
        return f"stopped at {at}{beyond if plan.not_counted else ''}"
    return f"going on to look {plan.reached + 1} of {len(plan.looks)} ({plan.looks[plan.reached]} seeds)"


def _notes(findings: Findings, exploratory: bool) -> list[str]:
    """Which SE each number uses, and where the terms are defined."""
    rule = findings.decision_rule
    notes = [
        "Δ: the mean over seeds of each seed's difference from the baseline on the same test sentences; its 95% "
        "interval uses SE = √(s_d²/n + v_shared) with Welch–Satterthwaite degrees of freedom. Seeds that way: "
        "descriptive (how many seeds lie beyond the tie margin on the side of the mean).",
        f"Holm p and verdict: rule `{rule.name}`, the rule the family was declared under: {rule.text}.",
    ]
    if findings.sequential is not None:
        notes[1:] = [
            "A row at a look holds the first seeds of the family's declared list up to that look (the one that "
            "decided it, or the latest reached while it is open), and its interval is the repeated 95% interval "
            "there (Jennison & Turnbull), which holds whichever look the study stops at; the plain one is "
            "labelled naive on the study page.",
            f"Verdict: rule `{rule.name}`'s tests (beyond the tie margin; TOST at ±m), each p unadjusted against "
            "its boundary at the look, which the plan's spending and the comparisons already decided set.",
        ]
    if exploratory:
        other = findings.exploratory_rule
        notes.append(
            f"Exploratory: rule `{other.name}` ({other.text}), read after these runs — not what the family declared."
        )
    notes.append("Terms: the glossary of results/README.md; every row in full: the study page's findings.")
    return [" ".join(notes)]


def headline_markdown(findings: Findings) -> str:
    """The study's results at a glance: the family line, then one table row per declared comparison
    (or, without a family, per test-set row), then which SE each number uses."""
    tables = findings.tables
    declared = [(t, r) for t in tables for r in t.rows if r.declared]
    lines = []
    plan = findings.interim
    if plan and plan.look is not None:
        lines += [
            f"**Interim: look {plan.look} of {len(findings.sequential.looks)} not reached ({plan.seeds} of its "
            f"{plan.planned} seeds).** A declared comparison is worded only at a planned look, and once decided "
            "it stays so.",
            "",
        ]
    elif plan:
        lines += [
            f"**Interim: {plan.seeds} of {plan.planned} planned seeds.** No comparison of the declared "
            "family is worded as a direction or as equivalent until every planned seed is in.",
            "",
        ]
    if findings.family:
        lines += [_family_line(findings, declared), ""]
        shown = declared
    else:
        lines += [f"No declared family: every comparison against `{findings.baseline}` is descriptive.", ""]
        shown = [(t, r) for t in tables if t.name == Table.TEST for r in t.rows]
    shown = [(t, r) for t, r in shown if r.mean_difference is not None]
    exploratory = bool(findings.exploratory_rule) and any(r.exploratory for _, r in shown)
    head = ["comparison", "measure", "Δ [95% interval]", "seeds that way", "Holm p", "verdict (declared)"]
    if findings.sequential is not None:
        head[2:5] = ["Δ [repeated 95% interval]", "seeds that way", "decided at"]
    if exploratory:
        head.append("exploratory reading")
    lines += table_head(head)
    lines += [_table_row(t, r, findings, exploratory) for t, r in shown]
    lines.append("")
    if shown and all(len(r.per_seed) <= 1 for _, r in shown):
        lines += ["One seed per configuration: no test and no interval; every row is that trained model.", ""]
    lines += _notes(findings, exploratory)
    return "\n".join(lines)


def _p_text(r: ComparisonRow) -> str:
    """The row's p, labelled: unadjusted, beside the Holm-adjusted p of a declared row."""
    if r.p_value is None:
        return ""
    declared = r.declared and r.p_holm is not None
    holm = f"Holm {format_p(r.p_holm)} by the family's rule" if declared else "not declared"
    if r.look is not None:
        holm = "decided look by look against its boundary, below"
    return f", p {format_p(r.p_value)} (against no difference, unadjusted; {holm})"


def _power_text(r: ComparisonRow, metric: str, alpha: float, margin: Optional[float]) -> str:
    """What the row's seeds can see by the current rule: the smallest true difference worded a
    direction 80% of the time at two-sided `alpha` (Holm's first step); for a declared row with a
    margin, the power to show ±m if the true difference were 0, and the seeds that would need."""
    power = r.power
    if power is None:
        return ""
    size = f"{fmt_number(power.detectable, metric).lstrip('+')} {unit_of(metric)}"
    text = f"; detectable {size} at 80% power (two-sided α {alpha:.2g})"
    if power.equivalence_power is not None:
        seeds = power.seeds_for_equivalence
        reach = f"{seeds} seeds for 80%" if seeds else "out of reach"
        m = fmt_number(margin, metric).lstrip("+")
        text += f", power to show ±{m} if the true difference were 0: {power.equivalence_power:.0%} ({reach})"
    return text


def _row_sentence(r: ComparisonRow, metric: str, findings: Findings, alpha: float) -> str:
    n = len(r.per_seed)
    lower = " (lower is better)" if Measure(metric).lower_is_better else ""
    margin = findings.equivalence_margin.get(metric)
    sentence = (
        f"- `{r.config}` against `{findings.baseline}`, {r.compared_on}: mean difference "
        f"{fmt_number(r.mean_difference, metric)} {unit_of(metric)}{lower} over {n} seed{'s' if n != 1 else ''}"
        + _p_text(r)
        + _power_text(r, metric, alpha, margin)
        + f" — {r.finding}."
    )
    if r.exploratory:
        sentence += f" Exploratory (rule `{r.exploratory.rule}`): {r.exploratory.finding}."
    return sentence


def sentences_markdown(findings: Findings) -> str:
    """Each declared comparison (or, without a family, each test-set row) in full: its p, what its
    seeds can detect and its finding, then the current rule's exploratory finding where there is one."""
    tables = findings.tables
    if findings.family:
        shown = [(t, r) for t in tables for r in t.rows if r.declared]
    else:
        shown = [(t, r) for t in tables if t.name == Table.TEST for r in t.rows]
    return "\n".join(
        _row_sentence(r, t.metric, findings, t.alpha or 0.05) for t, r in shown if r.mean_difference is not None
    )
