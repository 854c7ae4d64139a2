"""The study's design, chosen once from the family (`design_for`) or its findings (`design_of`): fixed
(every planned seed, then one decision by Holm's adjusted p) or sequential (study/judge/
sequential_findings.py reads the looks, study/stats/sequential_family.py decides at each). It owns what
differs between them (the tables decided on, the interim state, how a declared row is worded, the
pages' few differing words and cells), so that neither the judge nor the pages ask which they have."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence, Union

from study.judge.across import missing_sets
from study.judge.sequential_findings import read_looks
from study.judge.wording import (
    by_set,
    depends_words,
    describe,
    direction_words,
    format_p,
    outcome,
    verdict,
    withheld_reason,
    withheld_words,
    within_words,
)
from study.read.family import Family
from study.records import (
    ComparisonRow,
    Findings,
    FindingsTable,
    Interim,
    LookInterim,
    LookPlan,
    LookReading,
    Reading,
    RuleP,
    SequentialFindings,
    SetReading,
)
from study.stats.across_sets import DEPENDS
from study.stats.sequential import spending_text
from study.terms import Outcome, Withheld, Withholding

Tables = Sequence[FindingsTable]
Build = Callable[[Optional[Sequence]], Tables]  # the findings tables of the runs of some seeds (None: all)
Adjusted = Mapping[tuple[int, int], float]  # {(table, row): a Holm-adjusted p}
Worded = tuple[Optional[Withheld], Outcome, str]  # a row's reason for a withheld verdict, outcome, finding
NOT_FROM_DECLARING_COMMIT = Withheld(Withholding.NOT_FROM_DECLARING_COMMIT)
NOT_TESTED_AT_DECLARING_COMMIT = Withheld(Withholding.NOT_TESTED_AT_DECLARING_COMMIT)


def untested_words(untested: Sequence[str]) -> str:
    return f"a declared test set without the test of some seed: {', '.join(untested)}"


def commit_withheld(r: ComparisonRow) -> Optional[Withheld]:
    """Why a row's runs lack the proof that the family was declared first: some run trained, or tested
    (as its scores.json records), at a commit that did not declare it; or, a claim across test sets, why
    it lacks a test: a declared set without a test of every seed; None: they have it."""
    if missing_sets(r):
        return Withheld(Withholding.MISSING_SET, sets=missing_sets(r))
    if not r.from_declaring_commit:
        return NOT_FROM_DECLARING_COMMIT
    return None if r.tested_at_declaring_commit else NOT_TESTED_AT_DECLARING_COMMIT


@dataclass(frozen=True)
class FixedDesign:
    """Every planned seed, then one decision: Holm's adjusted p over the declared family."""

    looks: Optional[LookPlan] = None  # (a sequential design's state; none here)

    def read(self, build: Build, family: Family, configs: Optional[list[str]] = None) -> tuple[Tables, FixedDesign]:
        return build(None), self

    def record(self, findings: Findings) -> Findings:
        """The findings as this design's record (a sequential one carries where its plan stands)."""
        return findings

    def interim(self, tables: Tables, family: Family, missing: int = 0) -> Optional[Interim]:
        """The fewest planned seeds a declared comparison holds (one with no row at all holds none), of the
        plan's, while some lacks some; None: complete."""
        if not family.seeds:
            return None
        planned = set(family.seeds)
        held = [len(planned & set(r.seeds)) for t in tables for r in t.rows if r.declared]
        fewest = 0 if missing else min(held, default=0)
        return None if fewest == len(planned) else Interim(fewest, len(planned))

    def adjusted(self, holm_rule: Adjusted, holm_equivalence: Adjusted) -> tuple[Adjusted, Adjusted]:
        """The Holm-adjusted p that decide a declared row."""
        return holm_rule, holm_equivalence

    def word(self, r: ComparisonRow, reading: RuleP, metric: str, family: Family, plan: Optional[Interim]) -> Worded:
        if plan:
            withheld = Withheld(Withholding.INTERIM, len(set(family.seeds) & set(r.seeds)), plan.planned)
        else:
            withheld = commit_withheld(r)
        margin, equivalence = family.tie_margin.of(metric), family.equivalence.of(metric)
        said = outcome(r, reading, margin, r.declared, equivalence, withheld)
        own = reading.rule == family.rule  # (else an exploratory reading: never "declared")
        return withheld, said, verdict(r, reading, metric, margin, r.declared, equivalence, withheld, own)

    # the pages' words and cells
    headline_columns = ("Δ [95% interval]", "seeds that way", "Holm p of the direction test")
    interval_note = "its 95% interval uses SE = √(s_d²/n + v_shared) with {df}."

    def fixed_figures(self, r: ComparisonRow) -> bool:
        """Whether a row's planning figures (detectable Δ, power and seeds at Holm's first step) are its
        design's: a fixed design's; never a row decided at a sequential plan's looks."""
        return True

    def equivalence_cell(self, r: ComparisonRow) -> Optional[str]:
        """A row's equivalence cell where its design decides it (None: Holm's, the findings table's)."""
        return None

    # the current rule's reading of an older rule's family needs the looks read again under it
    # (study/judge/report.py); a fixed family's is worded beside its own (study/judge/verdicts.py)
    current_reads_apart = False

    def withheld_cell(self, row: ComparisonRow, reading: Reading) -> str:
        return withheld_reason(reading.withheld)

    def interval(self, r: ComparisonRow) -> tuple[Optional[float], Optional[float]]:
        """The 95% interval the headline shows beside Δ."""
        return r.seed_test.low, r.seed_test.high

    by_set_column = "Δ [95% interval]"

    def set_interval(self, s: SetReading, on: ComparisonRow) -> tuple[Optional[float], Optional[float]]:
        """A claim across test sets: the interval beside Δ on set `s` (`on`: the comparison's row there)."""
        return self.interval(on)

    def headline_p_cell(self, r: ComparisonRow) -> str:
        """What decides a row (the headline's cell; `table_p_cell`: the findings table's)."""
        return format_p(r.p_holm) if r.declared else "not declared"

    table_p_cell = headline_p_cell

    def p_column(self, rule: str) -> str:
        return f"p, Holm (declared, rule `{rule}`)"

    def p_words(self, r: ComparisonRow) -> str:
        declared = r.declared and r.p_holm is not None
        return f"Holm {format_p(r.p_holm)} by the family's rule" if declared else "not declared"

    def family_words(self, rest: int, untested: Sequence[str] = ()) -> tuple[str, str]:
        """(how the family is decided, the rows without a verdict) of the family line; `untested`: the declared
        test sets some seed of a declared row has no test on."""
        why = "interim or not from the declaring commit"
        why = f"interim, not from the declaring commit, or {untested_words(untested)}" if untested else why
        withheld = f", {rest} without a verdict ({why})" if rest else ""
        return "with Holm's correction over the family", withheld

    def verdict_notes(self, rule_name: str, rule_text: str) -> list[str]:
        return [
            f"Holm p of the direction test and verdict: rule `{rule_name}`, the rule the family was declared "
            f"under: {rule_text}; an equivalence verdict gives its own equivalence Holm p (TOST at ±m), an "
            "inconclusive one why."
        ]

    def headline_interim(self, plan: Optional[Interim]) -> list[str]:
        """The headline's lines on an interim study (none for a complete one)."""
        return [self._interim(plan, None)[0], ""] if plan else []

    def interim_paragraph(self, plan: Optional[Interim], family: Optional[str]) -> list[str]:
        """The findings page's paragraph on an interim study (none for a complete one)."""
        return [self._interim(plan, family)[1]] if plan else []

    def _interim(self, plan: Interim, family: Optional[str]) -> tuple[str, str]:
        """(the headline's line, the findings page's paragraph) on an interim study."""
        return (
            f"**Interim: {plan.seeds} of {plan.planned} planned seeds.** No comparison of the declared "
            "family is worded as a direction or as equivalent until every planned seed is in.",
            f"**Interim: {plan.seeds} of {plan.planned} planned seeds** of the declared family "
            f"(`{family}`): no comparison is worded as a direction or as equivalent until every "
            "planned seed is in.",
        )

    def plan_paragraph(self) -> str:
        return ""

    def row_records(self, r: ComparisonRow) -> tuple[tuple[str, LookReading], ...]:
        """A row's design fields in <prefix>_findings.json."""
        return ()

    def serializes(self, field: str) -> bool:
        """Whether the findings JSON holds a field of study/records.Findings."""
        return field != "sequential"


FIXED = FixedDesign()


@dataclass(frozen=True)
class SequentialDesign(FixedDesign):
    """Looks at planned seed counts (`looks`: where the plan stands once read), each declared row decided
    at a look by its p against the boundary there; a row the family does not declare is worded as fixed."""

    def read(
        self, build: Build, family: Family, configs: Optional[list[str]] = None
    ) -> tuple[Tables, SequentialDesign]:
        tables, looks = read_looks(build, family, configs)
        return tables, SequentialDesign(looks)

    def record(self, findings: Findings) -> SequentialFindings:
        return SequentialFindings(**vars(findings), sequential=self.looks)

    def interim(self, tables: Tables, family: Family, missing: int = 0) -> Optional[Interim]:
        """Complete once the plan stopped; until then the fewest seeds of its next look a declared
        comparison holds."""
        looks = self.looks
        if not family.seeds or looks.stopped:
            return None
        return LookInterim(0 if missing else looks.held, looks.looks[looks.reached], looks.reached + 1)

    def adjusted(self, holm_rule: Adjusted, holm_equivalence: Adjusted) -> tuple[Adjusted, Adjusted]:
        """None: a sequential family is decided look by look (study/stats/sequential_family.py)."""
        return {}, {}

    def word(self, r: ComparisonRow, reading: RuleP, metric: str, family: Family, plan: Optional[Interim]) -> Worded:
        if r.look is None:  # a row the family does not declare
            return super().word(r, reading, metric, family, plan)
        withheld = commit_withheld(r)
        said = look_outcome(r, withheld)
        return withheld, said, look_verdict(r, said, reading, metric, family, withheld)

    headline_columns = ("Δ [repeated 95% interval]", "seeds that way", "decided at")
    interval_note = (
        "at a row's look its interval is the repeated 95% interval there (Jennison & Turnbull): it covers that "
        "comparison's true difference whichever look the study stops at, for each comparison alone, not for the "
        "family jointly (before the first look: the plain 95% interval, SE = √(s_d²/n + v_shared) with {df})."
    )

    def fixed_figures(self, r: ComparisonRow) -> bool:
        return r.look is None

    def equivalence_cell(self, r: ComparisonRow) -> Optional[str]:
        """A declared row's equivalence test at its look: its p against its boundary there."""
        if r.look is None or r.reading is None or r.reading.p_equivalence is None:
            return None
        look = r.look
        if look.look == 0:
            return "before the first look"
        return (
            f"p {_g(r.reading.p_equivalence)} against its boundary {_g(look.boundary_equivalence)} at look {look.look}"
        )

    current_reads_apart = True

    def withheld_cell(self, row: ComparisonRow, reading: Reading) -> str:
        if row.look is not None and commit_withheld(row) is None:
            return "no verdict before the first look" if row.look.look == 0 else f"open until look {row.look.look + 1}"
        return super().withheld_cell(row, reading)

    def interval(self, r: ComparisonRow) -> tuple[Optional[float], Optional[float]]:
        """A row at a look: its repeated 95% interval."""
        return r.look.repeated if r.look and r.look.look else super().interval(r)

    by_set_column = "Δ [repeated 95% interval]"

    def set_interval(self, s: SetReading, on: ComparisonRow) -> tuple[Optional[float], Optional[float]]:
        """Each set at its comparison's look: its repeated 95% interval there (the declared row's level)."""
        return s.repeated or super().set_interval(s, on)

    def headline_p_cell(self, r: ComparisonRow) -> str:
        return look_cell(r) if r.look is not None else "not declared"

    def table_p_cell(self, r: ComparisonRow) -> str:
        return f"at {look_cell(r)}" if r.look is not None else super().table_p_cell(r)

    def p_column(self, rule: str) -> str:  # a sequential family's declared rows are decided at a look
        return f"look (declared, rule `{rule}`, sequential)"

    def p_words(self, r: ComparisonRow) -> str:
        return "decided look by look against its boundary, below" if r.look is not None else super().p_words(r)

    def family_words(self, rest: int, untested: Sequence[str] = ()) -> tuple[str, str]:
        plan = self.looks
        spent = spending_text(plan.spending, plan.spending_equivalence)
        how = (
            f"look by look (at {', '.join(map(str, plan.looks))} seeds): Holm's procedure as a graph across the "
            f"comparisons, α spent across the looks by Lan–DeMets spending of the {spent} type (Maurer & Bretz 2013)"
        )
        if plan.stopped:  # at a look, and why (the last look: no look after it)
            why = "the last look" if plan.taken == len(plan.looks) else "every comparison decided"
            beyond = f"; seeds archived beyond it, not counted: {', '.join(map(str, plan.not_counted))}"
            at = f"look {plan.taken} of {len(plan.looks)} ({plan.looks[plan.taken - 1]} seeds, {why})"
            where = f"stopped at {at}{beyond if plan.not_counted else ''}"
        else:
            where = f"going on to look {plan.reached + 1} of {len(plan.looks)} ({plan.looks[plan.reached]} seeds)"
        why = f" ({untested_words(untested)})" if untested else ""
        return how, (f", {rest} without a verdict yet{why}" if rest else "") + f"; {where}"

    def verdict_notes(self, rule_name: str, rule_text: str) -> list[str]:
        return [
            "A row at a look holds the first seeds of the family's declared list up to that look (the one that "
            "decided it, or the latest reached while it is open); the plain 95% interval at the look is labelled "
            "naive in the findings.",
            f"Verdict: rule `{rule_name}`'s tests (beyond the tie margin; TOST at ±m), each p unadjusted against "
            "its boundary at the look, which the plan's spending and the comparisons already decided set.",
        ]

    def _interim(self, plan: Interim, family: Optional[str]) -> tuple[str, str]:
        return (
            f"**Interim: look {plan.look} of {len(self.looks.looks)} not reached ({plan.seeds} of its "
            f"{plan.planned} seeds).** A declared comparison is worded only at a planned look, and once decided "
            "it stays so.",
            f"**Interim: look {plan.look} of the sequential plan not reached ({plan.seeds} of its {plan.planned} "
            f"seeds)** of the declared family (`{family}`): a declared comparison is worded only at a look.",
        )

    def plan_paragraph(self) -> str:
        plan = self.looks
        return (
            f" Sequential plan: looks at {', '.join(map(str, plan.looks))} seeds, the first of the family's "
            f"declared seeds at each; each comparison's p against its boundary at the look instead of Holm's "
            f"adjusted p (Holm's procedure as a graph across the comparisons, α spent across the looks by "
            f"{spending_text(plan.spending, plan.spending_equivalence)}-type Lan–DeMets spending; Maurer & Bretz "
            "2013), a decision final at its look; repeated 95% intervals beside the naive ones "
            "(study/sequential_family.py)."
        )

    def row_records(self, r: ComparisonRow) -> tuple[tuple[str, LookReading], ...]:
        return (("look", r.look),) if r.look is not None else ()

    def serializes(self, field: str) -> bool:
        return True


Design = Union[FixedDesign, SequentialDesign]


def design_for(family: Family) -> Design:
    """The family's design, before its runs are read: sequential where it plans looks."""
    return SequentialDesign() if family.plan else FIXED


def design_of(findings: Findings) -> Design:
    """The design a findings report was decided under, with its state."""
    return SequentialDesign(findings.sequential) if isinstance(findings, SequentialFindings) else FIXED


def look_cell(r: ComparisonRow) -> str:
    """Where a declared row stands: the look that decided it, the look it is open after, or the first one."""
    look = r.look
    if look.look == 0:
        return f"before look 1 ({look.seeds} of {look.next_seeds} seeds)"
    at = f"look {look.look} of {look.looks} ({look.seeds} seeds)"
    if look.decided:
        return at
    return f"{at}, undecided" if look.last else f"open after {at}"


def look_outcome(row: ComparisonRow, withheld: Optional[Withheld] = None) -> Outcome:
    """What a declared row says at its look: its decision, 'inconclusive' (the last look came without
    one), or 'withheld' (open until a later look, or `withheld` says why not)."""
    look = row.look
    if row.mean_difference is None:
        return Outcome.NOT_TESTED
    if withheld or not look.decided:
        return Outcome.INCONCLUSIVE if look.last and not withheld else Outcome.WITHHELD
    if look.direction == DEPENDS:
        return Outcome.DEPENDS
    if look.direction:
        return Outcome.BOTH if look.equivalent else Outcome.DIRECTION
    return Outcome.EQUIVALENT


def _g(x: Optional[float]) -> str:
    """A p or a boundary to two significant digits (a boundary is often below 0.001)."""
    return "–" if x is None else f"{x:.2g}"


def look_verdict(
    row: ComparisonRow, said: Outcome, reading: RuleP, metric: str, family: Family, withheld: Optional[Withheld]
) -> str:
    """A declared row's finding: its decision and the look that made it (each p against its boundary
    there), or why there is none yet; then the seeds against the tie margin, the naive 95% interval and
    the repeated one (valid whichever look the study stops at)."""
    look, margin, equivalence = row.look, family.tie_margin.of(metric), family.equivalence.of(metric)
    text = describe(row, metric, margin, look.repeated or ())
    text = f"{text}; {by_set(row, metric)}" if row.sets else text
    if said == Outcome.NOT_TESTED:
        return row.untested or said.value
    if withheld:
        return f"{withheld_words(withheld)}; {text}"
    if look.look == 0:
        return f"interim ({look.seeds} of the {look.next_seeds} seeds of the first look): no verdict; {text}"
    at = f"look {look.look} of {look.looks}, {look.seeds} seeds"
    direction_p = f"p {_g(reading.p_rule)} against its boundary {_g(look.boundary)}"
    equal_p = f"equivalence p {_g(reading.p_equivalence)} against {_g(look.boundary_equivalence)}"
    if said == Outcome.WITHHELD:
        until = f"no verdict until the look at {look.next_seeds} seeds"
        return f"open after {at} ({direction_p}, {equal_p}): {until}; {text}"
    if said == Outcome.INCONCLUSIVE:
        return (
            f"inconclusive: the last look ({at}) came without a decision ({direction_p}, {equal_p}); "
            f"neither a direction nor equivalent within {within_words(equivalence, metric)}; {text}"
        )
    words = []
    if look.direction == DEPENDS:
        words.append(f"{depends_words(row, metric)} ({direction_p})")
    elif look.direction:
        words.append(f"{direction_words(row, reading, metric, margin)} ({direction_p})")
    if look.equivalent:
        words.append(f"equivalent within {within_words(equivalence, metric)} ({equal_p})")
    declared = " (declared)" if reading.rule == family.rule else ""  # (an exploratory reading: never declared)
    return f"{' and '.join(words)}, decided at {at}{declared}; {text}"
