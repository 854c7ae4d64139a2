"""A sequential family's findings look by look (study/stats/sequential_family.py decides): look k reads
the first n_k seeds of the family's declared seed list — never whichever runs finished first — and is
reached once every declared comparison holds all of them. At each reached look the declared rows'
unadjusted tests (the family rule's p beyond the tie margin, the TOST p at ±m, the sign) go to
`decide`; the study stops at the first look where every declared comparison is decided, or the last.

A declared row is presented at the look that decided it (its p, the boundary it passed, its repeated
95% interval), or at the latest look reached while open, or before the first look (no verdict); the
other rows over the seeds of the look the study stopped at, or over every seed while it goes on.
Seeds archived beyond a stop are listed, not counted."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Optional, Sequence

from study.judge.across import declared_tests, missing_sets, rows_by_key, with_sets
from study.read.family import Family, missing_rows
from study.records import ComparisonRow, Configuration, FindingsTable, LookPlan, LookReading
from study.stats.rules import RULES
from study.stats.seed_test import ALPHA
from study.stats.sequential_family import Decision, LookTests, decide, nominal_level, repeated_interval
from study.terms import RowKey

Tables = Sequence[FindingsTable]


def restricted(groups: Sequence[Configuration], seeds: Sequence) -> list[Configuration]:
    """Each configuration with only its runs of `seeds` (a look's)."""
    keep = set(seeds)
    return [replace(g, runs=tuple(r for r in g.runs if r.seed in keep)) for g in groups]


def with_rows(tables: Tables, change: Callable[[int, int, ComparisonRow], ComparisonRow]) -> tuple[FindingsTable, ...]:
    """New tables whose rows are `change(table index, row index, row)`."""
    return tuple(replace(t, rows=tuple(change(i, j, r) for j, r in enumerate(t.rows))) for i, t in enumerate(tables))


def _declared(tables: Tables, family: Family) -> Mapping[RowKey, tuple[FindingsTable, ComparisonRow]]:
    return {r.key: (t, r) for t in tables for r in t.rows if family.declares(r.key)}


def _reached(
    tables: Tables, family: Family, seeds: Sequence, keys: Sequence[RowKey], configs: Optional[list[str]]
) -> bool:
    """Every declared comparison still open (`keys`) has a tested row holding every one of the look's seeds."""
    declared, rule = _declared(tables, family), RULES[family.rule]
    held = all(key in declared and set(seeds) <= set(declared[key][1].seeds) for key in keys)
    tested = all(declared[key][1].p_value is not None for key in keys if key in declared)
    # (a claim across test sets: every set's row of those seeds tested too, or the look is not reached)
    spans = [with_sets(tables, r, rule, t.metric, family) for t, r in (declared[k] for k in keys if k in declared)]
    return (
        bool(keys)
        and held
        and tested
        and not any(map(missing_sets, spans))
        and not missing_rows(tables, family, configs)
    )


def look_tests(tables: Tables, family: Family, keys: Sequence[RowKey]) -> LookTests:
    """The declared rows' unadjusted tests at one look, in `keys`' order, by the family's rule (a row
    whose measure has no equivalence margin: equivalence p 1, it can only be decided by a direction)."""
    rule = RULES[family.rule]
    rows = [(t, with_sets(tables, r, rule, t.metric, family)) for t, r in (_declared(tables, family)[k] for k in keys)]
    tests = [declared_tests(rule, r, t.metric, family) for t, r in rows]  # (a set lacking its test: p 1)
    ps = tuple(1.0 if p is None else p for p, _, _ in tests)
    return LookTests(ps, tuple(1.0 if p is None else p for _, p, _ in tests), tuple(sign for _, _, sign in tests))


def _at_look(
    at_looks: Sequence[Tables], key: RowKey, decision: Decision, taken: int, family: Family, stopped: bool
) -> ComparisonRow:
    """A declared comparison's row at the look that decided it (open: the last look taken), with its reading."""
    plan = family.plan
    look = _read_at(decision, taken)
    table, row = _declared(at_looks[look], family)[key]
    row, last = with_sets(at_looks[look], row, RULES[family.rule], table.metric, family), look == len(plan.looks) - 1
    nominal = nominal_level(plan.fractions, ALPHA, plan.spending, look, plan.exact)  # the row alone
    low, high = _repeated(row, nominal, family)
    at = rows_by_key(at_looks[look])  # (each set at the same level: the IUT's)
    sets = tuple(
        replace(s, repeated=_repeated(at[s.key(row.key)], nominal, family) if s.tested else ()) for s in row.sets
    )
    reading = LookReading(
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
        (low, high),
    )
    return replace(row, look=reading, sets=sets)


def _repeated(row: ComparisonRow, nominal: float, family: Family) -> tuple[float, float]:
    test = row.seed_test
    return repeated_interval(test.mean, test.se, RULES[family.rule].df(test), nominal)


def _read_at(decision: Decision, taken: int) -> int:
    """The look (0-based) a declared row is read at: the one that decided it, else the last one taken."""
    return decision.look if decision.look is not None else taken - 1


def _sets_at_look(at_looks: Sequence[Tables], row: ComparisonRow, look: int) -> Mapping[RowKey, ComparisonRow]:
    """A claim across test sets: its sets' rows at the look its declared row is read at (later seeds aside),
    each with its repeated 95% interval there."""
    at = rows_by_key(at_looks[look])
    sets = [(s.key(row.key), s) for s in row.sets if not s.own]
    return {k: replace(at[k], repeated=s.repeated) for k, s in sets if k in at}


def read_looks(
    build: Callable[[Optional[Sequence]], Tables], family: Family, configs: Optional[list[str]] = None
) -> tuple[tuple[FindingsTable, ...], LookPlan]:
    """The tables to word and where the plan stands; `build(seeds)`: the findings tables of the runs of
    `seeds` (None: every run)."""
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
        return with_rows(everything, lambda i, j, r: waiting.get(r.key, r)), state
    stopped = not still_open or taken == len(plan.looks)
    base = at_looks[taken - 1] if stopped else everything
    rows = {key: _at_look(at_looks, key, decision, taken, family, stopped) for key, decision in zip(keys, decisions)}
    sets = [_sets_at_look(at_looks, rows[key], _read_at(d, taken)) for key, d in zip(keys, decisions)]
    rows = {**rows, **{k: r for found in sets for k, r in found.items()}}
    counted = set(family.seeds[: plan.looks[taken - 1]]) if stopped else set(family.seeds)
    archived = {s for _, r in declared.values() for s in r.seeds}
    beyond = [s for s in family.seeds if s in archived and s not in counted]  # in the declared order
    state = replace(state, taken=taken, stopped=stopped, not_counted=tuple(beyond))
    return with_rows(base, lambda i, j, r: rows.get(r.key, r)), state
