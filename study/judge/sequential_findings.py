"""A sequential family's findings look by look (study/stats/sequential_family.py decides; this reads the
runs for it): look k reads the first n_k seeds of the family's declared, ordered seed list — never
whichever runs finished first — and is reached once every declared comparison holds all of them.
At each reached look the declared rows' unadjusted tests (the current rule's p beyond the tie margin,
the TOST p at ±m, the sign) go to `decide`, which says what each look decides and where the study
stops: at the first look where every declared comparison is decided, or at the last.

The tables presented: a declared row at the look that decided it (its seeds, its p, the boundary it
passed and its repeated 95% interval), or at the latest look reached while it is open, or with every
seed in before the first look (no verdict); the other rows over the seeds of the look the study
stopped at, or over every seed while it goes on. Seeds archived beyond a stop are listed, not counted
(`LookPlan.not_counted`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from study.read.family import Family, missing_rows
from study.records import ComparisonRow, Configuration, FindingsTable, LookPlan, LookReading
from study.stats.rules import CURRENT
from study.stats.seed_test import ALPHA
from study.stats.sequential import boundaries
from study.stats.sequential_family import Decision, LookTests, decide, repeated_interval
from study.terms import RowKey

Tables = Sequence[FindingsTable]


def restricted(groups: Sequence[Configuration], seeds: Sequence) -> list[Configuration]:
    """Each configuration with only its runs of `seeds` (a look's)."""
    keep = set(seeds)
    return [replace(g, runs=tuple(r for r in g.runs if r.seed in keep)) for g in groups]


def _declared(tables: Tables, family: Family) -> Mapping[RowKey, tuple[FindingsTable, ComparisonRow]]:
    return {r.key: (t, r) for t in tables for r in t.rows if family.declares(r.key)}


def _reached(
    tables: Tables, family: Family, seeds: Sequence, keys: Sequence[RowKey], configs: Optional[list[str]]
) -> bool:
    """Every declared comparison still open (`keys`) has a tested row holding every one of the look's seeds."""
    declared = _declared(tables, family)
    held = all(key in declared and set(seeds) <= set(declared[key][1].seeds) for key in keys)
    tested = all(declared[key][1].p_value is not None for key in keys if key in declared)
    return bool(keys) and held and tested and not missing_rows(tables, family, configs)


def look_tests(tables: Tables, family: Family, keys: Sequence[RowKey]) -> LookTests:
    """The declared rows' unadjusted tests at one look, in `keys`' order, by the current rule (a row
    whose measure has no equivalence margin: equivalence p 1, it can only be decided by a direction)."""
    declared = _declared(tables, family)
    decision, equivalence, sign = [], [], []
    for key in keys:
        t, r = declared[key]
        diffs, known = np.array(r.differences), CURRENT.known(r.seed_test)
        decision.append(float(CURRENT.decision_p(diffs, known, family.tie_margin.of(t.metric))))
        margin = family.equivalence.of(t.metric)
        equivalence.append(float(CURRENT.equivalence_p(diffs, known, margin)) if margin else 1.0)
        sign.append(int(np.sign(r.mean_difference)))
    return LookTests(tuple(decision), tuple(equivalence), tuple(sign))


def _look_reading(row: ComparisonRow, decision: Decision, look: int, family: Family, stopped: bool) -> LookReading:
    """A declared row's reading at `look` (0-based): decided there, or open after it."""
    plan = family.plan
    last = look == len(plan.looks) - 1
    test = row.seed_test
    nominal = boundaries(plan.fractions, alpha=ALPHA, spending=plan.spending).nominal[look]  # the row alone
    low, high = repeated_interval(test.mean, test.se, test.df if test.df is not None else float("inf"), nominal)
    return LookReading(
        look + 1,
        len(plan.looks),
        plan.looks[look],
        decision.look is not None,
        last,
        decision.direction,
        decision.equivalent,
        None if decision.look is not None or stopped or last else plan.looks[look + 1],
        decision.boundary,
        decision.boundary_equivalence,
        low,
        high,
    )


def _at_look(
    at_looks: Sequence[Tables], key: RowKey, decision: Decision, taken: int, family: Family, stopped: bool
) -> ComparisonRow:
    """A declared comparison's row at the look that decided it (open: the last look taken), with its reading."""
    look = decision.look if decision.look is not None else taken - 1
    _, row = _declared(at_looks[look], family)[key]
    return replace(row, look=_look_reading(row, decision, look, family, stopped))


def _with_rows(tables: Tables, rows: Mapping[RowKey, ComparisonRow]) -> tuple[FindingsTable, ...]:
    """The tables with each row whose key is in `rows` replaced by it."""
    return tuple(replace(t, rows=tuple(rows.get(r.key, r) for r in t.rows)) for t in tables)


def read_looks(
    build: Callable[[Optional[Sequence]], Tables], family: Family, configs: Optional[list[str]] = None
) -> tuple[tuple[FindingsTable, ...], LookPlan]:
    """The tables to word (see the module's docstring) and where the plan stands; `build(seeds)` makes
    the findings tables of the runs of `seeds` (None: every run)."""
    plan = family.plan
    everything = tuple(build(None))
    keys = sorted(_declared(everything, family), key=lambda k: (k.table, k.config, k.label))  # one fixed order
    at_looks: list[Tables] = []
    tests: list[LookTests] = []  # each reached look's, computed once
    decisions: tuple[Decision, ...] = tuple(Decision() for _ in keys)
    taken = 0
    for n in plan.looks:  # a look is reached when the comparisons still open hold its seeds
        still_open = [key for key, d in zip(keys, decisions) if d.look is None]
        if not still_open:  # every comparison decided: no later look is built
            break
        tables = tuple(build(family.seeds[:n]))
        if not _reached(tables, family, family.seeds[:n], still_open, configs):
            break
        at_looks.append(tables)
        tests.append(look_tests(tables, family, keys))
        decisions, taken = decide(plan, tests)
    still_open = [key for key, d in zip(keys, decisions) if d.look is None]
    following = set(family.seeds[: plan.looks[min(len(at_looks), len(plan.looks) - 1)]])
    declared = _declared(everything, family)
    held = min((len(following & set(declared[key][1].seeds)) for key in still_open), default=0)
    state = LookPlan(plan.looks, plan.spending, plan.spending_equivalence, len(at_looks), 0, False, held)
    if not at_looks:  # before the first look: every seed in, no verdict
        first = set(family.seeds[: plan.looks[0]])
        waiting = {
            key: replace(r, look=LookReading(0, len(plan.looks), len(first & set(r.seeds)), False, False,
                                             next_seeds=plan.looks[0]))
            for key, (_, r) in declared.items()
        }  # fmt: skip
        return _with_rows(everything, waiting), state
    stopped = not still_open or taken == len(plan.looks)
    base = at_looks[taken - 1] if stopped else everything
    rows = {key: _at_look(at_looks, key, decision, taken, family, stopped) for key, decision in zip(keys, decisions)}
    counted = set(family.seeds[: plan.looks[taken - 1]]) if stopped else set(family.seeds)
    archived = {s for _, r in declared.values() for s in r.seeds}
    beyond = [s for s in family.seeds if s in archived and s not in counted]  # in the declared order
    return _with_rows(base, rows), replace(state, taken=taken, stopped=stopped, not_counted=tuple(beyond))
