"""Wording a row of the findings: numbers in their measure's digits, the descriptive part every row
carries (the seeds against the tie margin, the 95% interval), and what one rule's reading
(study/records.Reading, study/judge/verdicts.py makes them) lets a declared row say."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from study.judge.across import candidate
from study.records import ComparisonRow, RuleP
from study.stats.across_sets import Across
from study.stats.rules import RULES
from study.stats.seed_test import ALPHA, ONE_SEED
from study.terms import Measure, Outcome, Withheld, Withholding


def fmt_number(x: Optional[float], metric: str) -> str:
    """A difference in its measure's digits (study/terms.Measure, or its name), signed; – for none."""
    return "–" if x is None else f"{x:+.{Measure(metric).digits}f}"


def unit_of(metric: str) -> str:
    return Measure(metric).unit


def format_alpha(alpha: float) -> str:
    """A level to the digits that tell it apart (0.0125, not 0.013)."""
    return f"{alpha:.3g}"


def format_p(p: Optional[float]) -> str:
    """A p-value to the digits that carry information."""
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def seed_signs(diffs: Sequence[float], margin: float) -> tuple[int, int, int]:
    """Seeds above +margin, below -margin, and within."""
    above = sum(d > margin for d in diffs)
    below = sum(d < -margin for d in diffs)
    return above, below, len(diffs) - above - below


def describe(row: ComparisonRow, metric: str, margin: float, repeated: Sequence[float] = ()) -> str:
    """A descriptive row: the seeds' signs against the tie margin and the 95% interval; at a sequential look
    (`repeated`: the repeated 95% interval there) that one is naive, and the repeated one follows."""
    above, below, within = seed_signs(row.differences, margin)
    m = fmt_number(margin, metric).lstrip("+")
    signs = f"seeds: {above} above +{m}, {below} below -{m}, {within} within"
    if row.p_value is None:
        return f"{ONE_SEED}; {signs}"
    low, high = (fmt_number(end, metric) for end in (row.seed_test.low, row.seed_test.high))
    if not repeated:
        return f"{signs}; 95% interval {low} to {high}"
    first, last = (fmt_number(end, metric) for end in repeated)
    return f"{signs}; naive 95% interval {low} to {high}; repeated 95% interval {first} to {last}"


def withheld_reason(withheld: Withheld) -> str:
    """Why a verdict is withheld, in a few words (the headline's verdict cell)."""
    if withheld.why is Withholding.INTERIM:
        return f"interim ({withheld.held} of {withheld.planned} planned seeds)"
    if withheld.why is Withholding.MISSING_SET:
        return f"descriptive: not every seed of it is tested on the declared test set(s) {', '.join(withheld.sets)}"
    done = "tested at" if withheld.why is Withholding.NOT_TESTED_AT_DECLARING_COMMIT else "trained from"
    return f"descriptive: not every run of it was {done} a commit that declared the family"


def withheld_words(withheld: Withheld) -> str:
    """Why a verdict is withheld, as a finding begins."""
    reason = withheld_reason(withheld)
    return f"{reason}: no verdict" if withheld.why is Withholding.INTERIM else reason


def outcome(
    row: ComparisonRow,
    reading: RuleP,
    margin: float,
    declared: bool,
    equivalence: Optional[float] = None,
    withheld: Optional[Withheld] = None,
) -> Outcome:
    """What the reading's rule lets a row say (study/terms.Outcome): 'equivalent' where the equivalence
    rows' Holm p < ALPHA (study/stats/equivalence.py); 'inconclusive' only with an equivalence margin."""
    if row.mean_difference is None:
        return Outcome.NOT_TESTED
    if declared and withheld and withheld.why is Withholding.MISSING_SET:  # (no across p without every set)
        return Outcome.WITHHELD
    if not declared or row.p_value is None or reading.p_holm is None:
        return Outcome.DESCRIPTIVE
    if withheld:
        return Outcome.WITHHELD
    sign = bool(RULES[reading.rule].direction(np.array(row.differences), reading.p_holm, margin))
    if sign and row.sets and candidate(row) is Across.DEPENDS:
        return Outcome.DEPENDS
    p_eq = reading.p_equivalence_holm
    equal = p_eq is not None and p_eq < ALPHA
    if sign:
        return Outcome.BOTH if equal else Outcome.DIRECTION
    if equal:
        return Outcome.EQUIVALENT
    return Outcome.INCONCLUSIVE if equivalence is not None else Outcome.DESCRIPTIVE


def direction_words(row: ComparisonRow, reading: RuleP, metric: str, margin: float) -> str:
    """'ahead'/'behind' (lower is better for NLL) and how far, in the reading's rule's words."""
    up = row.mean_difference > 0
    way = "ahead" if up != Measure(metric).lower_is_better else "behind"
    if RULES[reading.rule].veto:  # the older rule's words: unanimous beyond the margin, or on average
        above, below, _ = seed_signs(row.differences, margin)
        how = "in every seed" if (above if up else below) == len(row.per_seed) else "on average"
    else:
        how = f"by more than {fmt_number(margin, metric).lstrip('+')} {unit_of(metric)}"  # the tie margin
    return f"{way} {how}{across_words(row)}"


def across_words(row: ComparisonRow) -> str:
    """' across the declared test sets (a, b)' of a claim across test sets, said after its direction or
    equivalence ('' for a claim on its own rows)."""
    return f" across the declared test sets ({', '.join(s.name for s in row.sets)})" if row.sets else ""


def depends_words(row: ComparisonRow, metric: str) -> str:
    """'depends on the test set', naming which way on which declared set (by its mean difference)."""
    lower = Measure(metric).lower_is_better
    ways = [f"{'ahead' if (s.mean > 0) != lower else 'behind'} on {s.name}" for s in row.sets if s.mean]
    return f"{Outcome.DEPENDS.value}: {', '.join(ways)}"


def by_set(row: ComparisonRow, metric: str) -> str:
    """A claim across test sets: each set's mean difference and the rule's decision p there, unadjusted."""
    sets = [
        f"{s.name} {fmt_number(s.mean, metric)} (p {format_p(s.p)})" if s.tested else f"{s.name} –" for s in row.sets
    ]
    return f"by test set: {', '.join(sets)}"


VETO_WORDS = "a seed lies beyond the tie margin the other way"


def vetoed(reading: RuleP) -> bool:
    """Whether the older rule's veto, not its test, kept a declared row from a direction."""
    return RULES[reading.rule].veto and reading.p_holm is not None and reading.p_holm < ALPHA


def within_words(equivalence: Optional[float], metric: str) -> str:
    """'±m unit' of an equivalence margin ('' without one)."""
    return f"±{fmt_number(equivalence, metric).lstrip('+')} {unit_of(metric)}" if equivalence else ""


def verdict(
    row: ComparisonRow,
    reading: RuleP,
    metric: str,
    margin: float,
    declared: bool,
    equivalence: Optional[float] = None,
    withheld: Optional[Withheld] = None,
    own: bool = True,
) -> str:
    """The finding of one row under a reading, worded by its `outcome` with the Holm p that decided it,
    then the descriptive part; a verdict is marked declared only by the family's own rule (`own`), never
    in another rule's (exploratory) reading."""
    said = outcome(row, reading, margin, declared, equivalence, withheld)
    if said == Outcome.NOT_TESTED:
        return row.untested or said.value
    text = describe(row, metric, margin, row.repeated)
    text = f"{text}; {by_set(row, metric)}" if row.sets else text
    if said == Outcome.DESCRIPTIVE:
        return text
    if said == Outcome.WITHHELD:
        return f"{withheld_words(withheld)}; {text}"
    within = within_words(equivalence, metric)
    p_eq = format_p(reading.p_equivalence_holm)
    if said == Outcome.INCONCLUSIVE:
        why = f"Holm p {format_p(reading.p_holm)}"
        if vetoed(reading):
            why += f", but {VETO_WORDS}"
        return (
            f"inconclusive: no direction worded ({why}) and not shown equivalent within {within} "
            f"(equivalence Holm p {p_eq}); {text}"
        )
    declared_tag = ", declared" if own else ""
    equal = f"equivalent within {within}{across_words(row)} (equivalence Holm p {p_eq}{declared_tag})"
    if said == Outcome.EQUIVALENT:
        return f"{equal}; {text}"
    way = f"{direction_words(row, reading, metric, margin)} (Holm p {format_p(reading.p_holm)}{declared_tag})"
    if said == Outcome.DEPENDS:
        return f"{depends_words(row, metric)} (Holm p {format_p(reading.p_holm)}{declared_tag}); {text}"
    if said == Outcome.BOTH:
        return f"{way} and {equal}: a small difference inside the margin; {text}"
    return f"{way}; {text}"
