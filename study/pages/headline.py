"""What a study's results say, generated from its findings by fixed templates (no result sentence of
the README is written by hand): `headline_markdown`, the table a reader takes in at a glance
(<prefix>_headline.md, copied verbatim by the README and the study page), and `sentences_markdown`, each
declared comparison in full (the top of <prefix>_findings.md). Terms are defined in results/README.md."""

from __future__ import annotations

from typing import Optional

from study.judge.design import FIXED, Design, design_of
from study.judge.wording import (
    VETO_WORDS,
    across_words,
    depends_words,
    direction_words,
    fmt_number,
    format_alpha,
    format_p,
    seed_signs,
    unit_of,
    vetoed,
    within_words,
)
from study.records import ComparisonRow, Findings, FindingsTable, Reading
from study.stats.rules import RULES
from study.terms import Measure, Outcome, Table, Withholding
from utils.markdown import table_head, table_row


def _shown(findings: Findings) -> list[tuple[FindingsTable, ComparisonRow]]:
    """The rows the pages show: the declared ones (without a family, the test set's) that have a difference."""
    return [
        (t, r)
        for t in findings.tables
        for r in t.rows
        if (r.declared if findings.family else t.name == Table.TEST) and r.mean_difference is not None
    ]


def short_verdict(
    reading: Optional[Reading],
    row: ComparisonRow,
    metric: str,
    margin: float,
    equivalence: Optional[float],
    design: Design = FIXED,
    with_p: bool = False,
) -> str:
    """A reading's verdict in a few words, each part with the test that gave it: equivalence with its
    equivalence Holm p, a veto's 'inconclusive' with its reason, a direction with its Holm p where no
    column holds it (`with_p`); why it is withheld: the design's words."""
    said = reading.outcome if reading is not None else None
    if said == Outcome.WITHHELD:
        return design.withheld_cell(row, reading)
    if said == Outcome.DEPENDS:
        holm = f" (Holm p {format_p(reading.p_holm)})" if with_p and reading.p_holm is not None else ""
        return f"{depends_words(row, metric)}{holm}"
    if said not in (Outcome.DIRECTION, Outcome.BOTH, Outcome.EQUIVALENT, Outcome.INCONCLUSIVE):
        return str(said or Outcome.DESCRIPTIVE)
    holm = f"Holm p {format_p(reading.p_holm)}" if with_p and reading.p_holm is not None else ""
    equal = reading.p_equivalence_holm
    equal = f"equivalence Holm p {format_p(equal)}" if equal is not None else ""
    if said == Outcome.INCONCLUSIVE:
        why = [f"vetoed: {VETO_WORDS}"] if vetoed(reading) else []
        why += [p for p in (holm, equal) if p]
        return f"inconclusive ({'; '.join(why)})" if why else "inconclusive"
    parts = []
    if said in (Outcome.DIRECTION, Outcome.BOTH):
        direction = direction_words(row, reading, metric, margin)
        parts.append(f"{direction} ({holm})" if holm else direction)
    if said in (Outcome.EQUIVALENT, Outcome.BOTH):
        within = f"equivalent within {within_words(equivalence, metric)}{across_words(row)}"
        parts.append(f"{within} ({equal})" if equal else within)
    return " and ".join(parts)


def compared_on(r: ComparisonRow) -> str:
    """What a row compares on; a claim across test sets names its own split (its Δ is that split's)."""
    return r.compared_on + next((f" {s.name}" for s in r.sets if s.own), "")


def _interval(r: ComparisonRow, metric: str, design: Design, bounds: Optional[tuple] = None) -> str:
    """Δ with its interval: the design's for the row, or `bounds`."""
    mean = fmt_number(r.mean_difference, metric)
    if r.seed_test.low is None:
        return mean
    low, high = bounds or design.interval(r)
    return f"{mean} [{fmt_number(low, metric)}, {fmt_number(high, metric)}]"


def _seeds_that_way(r: ComparisonRow, metric: str, margin: float) -> str:
    """'k of n' seeds beyond the tie margin on the side of the mean (descriptive, never a veto); a mean of
    exactly 0 has no side: both counts."""
    diffs = r.differences
    above, below, _ = seed_signs(diffs, margin)
    m = fmt_number(margin, metric).lstrip("+")
    if r.mean_difference == 0:
        return f"{above} of {len(diffs)} above +{m}, {below} below -{m}"
    up = r.mean_difference > 0
    return f"{above if up else below} of {len(diffs)} {'above +' if up else 'below -'}{m}"


def _table_row(t: FindingsTable, r: ComparisonRow, findings: Findings, exploratory: bool) -> str:
    design = design_of(findings)
    metric = t.metric
    margin = findings.tie_margin[metric]
    equivalence = findings.equivalence_margin.get(metric)
    lower = ", lower is better" if Measure(metric).lower_is_better else ""
    cells = [
        f"`{r.config}`",
        f"{compared_on(r)} ({unit_of(metric)}{lower})",
        _interval(r, metric, design),
        _seeds_that_way(r, metric, margin),
        design.headline_p_cell(r),
        short_verdict(r.reading, r, metric, margin, equivalence, design),
    ]
    other = r.exploratory
    if exploratory and other is None:
        cells.append("–")
    elif exploratory and other.outcome == r.outcome:  # a direction's sign is the mean's under both
        cells.append("same verdict")
    elif exploratory:  # the current rule's verdict with the Holm p it rests on (no column holds them)
        cells.append(short_verdict(other, r, metric, margin, equivalence, design, with_p=True))
    return table_row(cells)


def _by_set(findings: Findings, across: list[tuple[FindingsTable, ComparisonRow]]) -> list[str]:
    """A claim across test sets: each set's own row of the comparison beside the verdict (none without one)."""
    if not across:
        return []
    design = design_of(findings)
    lines = [
        "By test set (each set's own row: the verdict above holds across the sets only where it holds on each; "
        "p: the rule's decision p on that set, unadjusted):",
        "",
        *table_head(["comparison", "test set", design.by_set_column, "seeds that way", "p (decision)"]),
    ]
    for t, r in across:
        margin = findings.tie_margin.get(t.metric, 0.0)
        for s in r.sets:
            on = findings.row(s.key(r.key))
            if on is None or not s.tested:
                lines.append(table_row([f"`{r.config}`", s.name, "–", "–", "not tested on every seed"]))
                continue
            interval = _interval(on, t.metric, design, design.set_interval(s, on))
            cells = [interval, _seeds_that_way(on, t.metric, margin), format_p(s.p)]
            lines.append(table_row([f"`{r.config}`", s.name, *cells]))
    return [*lines, ""]


def _family_line(findings: Findings) -> str:
    counts = [r.outcome for t in findings.tables for r in t.rows if r.declared]
    # ("depends on the test set" only where a claim spans test sets and says it)
    said = {k: counts.count(k) for k in Outcome if k.worded and (k != Outcome.DEPENDS or k in counts)}
    rest = len(counts) - sum(said.values())
    counted = ", ".join(f"{n} {'directions' if k == Outcome.DIRECTION and n != 1 else k}" for k, n in said.items())
    declared = [r.reading.withheld for t in findings.tables for r in t.rows if r.declared and r.reading.withheld]
    untested = sorted({name for w in declared if w.why == Withholding.MISSING_SET for name in w.sets})
    how, withheld = design_of(findings).family_words(rest, untested)
    return (
        f"Declared family `{findings.family}`: {findings.family_size} comparisons against "
        f"`{findings.baseline}`, decided by rule `{findings.decision_rule.name}` {how}: "
        f"{counted}{withheld}."
    )


def _notes(findings: Findings, exploratory: bool) -> str:
    """Which SE each number uses, and where the terms are defined."""
    rule, design = findings.decision_rule, design_of(findings)
    notes = [
        f"Δ: the mean over seeds of each seed's difference d from the baseline on the same test sentences (s_d: "
        f"the SD of the d); "
        f"{design.interval_note.format(df=RULES[rule.name].interval_df)} Seeds that way: descriptive (how many "
        "seeds lie beyond the tie margin on the side "
        "of the mean).",
        *design.verdict_notes(rule.name, rule.text),
    ]
    if exploratory:
        other = findings.exploratory_rule
        notes.append(
            f"Exploratory: rule `{other.name}` ({other.text}), read after these runs — not what the family declared."
        )
    notes.append("Terms: the glossary of results/README.md; every row in full: the study page's findings.")
    return " ".join(notes)


def headline_markdown(findings: Findings) -> str:
    """The family line, a table row per shown comparison, then which SE each number uses."""
    design = design_of(findings)
    lines = design.headline_interim(findings.interim)
    if findings.family:
        lines += [_family_line(findings), ""]
    else:
        lines += [f"No declared family: every comparison against `{findings.baseline}` is descriptive.", ""]
    shown = _shown(findings)
    exploratory = bool(findings.exploratory_rule) and any(r.exploratory for _, r in shown)
    head = ["comparison", "measure", *design.headline_columns, "verdict (declared)"]
    if exploratory:
        head.append("exploratory reading")
    lines += table_head(head)
    lines += [_table_row(t, r, findings, exploratory) for t, r in shown]
    lines.append("")
    lines += _by_set(findings, [(t, r) for t, r in shown if r.sets])
    if shown and all(len(r.per_seed) <= 1 for _, r in shown):
        lines += ["One seed per configuration: no test and no interval; every row is that trained model.", ""]
    return "\n".join([*lines, _notes(findings, exploratory)])


def _power_text(r: ComparisonRow, metric: str, alpha: float, margin: Optional[float]) -> str:
    """What the row's seeds can see by the current rule: the smallest true difference worded a direction
    80% of the time at two-sided `alpha` (Holm's first step); with a margin, the power to show ±m at 0."""
    power = r.power
    if power is None:
        return ""
    size = f"{fmt_number(power.detectable, metric).lstrip('+')} {unit_of(metric)}"
    text = f"; detectable {size} at 80% power (two-sided α {format_alpha(alpha)})"
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
    p_words = design_of(findings).p_words(r) if r.p_value is not None else ""  # beside what decides it
    sentence = (
        f"- `{r.config}` against `{findings.baseline}`, {compared_on(r)}: mean difference "
        f"{fmt_number(r.mean_difference, metric)} {unit_of(metric)}{lower} over {n} seed{'s' if n != 1 else ''}"
        + (f", p {format_p(r.p_value)} (against no difference, unadjusted; {p_words})" if p_words else "")
        + (_power_text(r, metric, alpha, margin) if design_of(findings).fixed_figures(r) else "")
        + f" — {r.finding}."
    )
    if r.exploratory:
        sentence += f" Exploratory (rule `{r.exploratory.rule}`): {r.exploratory.finding}."
    return sentence


def sentences_markdown(findings: Findings) -> str:
    """Each shown comparison in full: its p, what its seeds can detect, its finding (and the exploratory one)."""
    return "\n".join(_row_sentence(r, t.metric, findings, t.alpha or 0.05) for t, r in _shown(findings))
