"""A declared comparison whose claim spans several test sets (issue 78; the family's `test_sets:` and an
entry's `claim: across`): its row on the configurations' own split carries the verdict, read from its rows
on every declared set (study/judge/findings.py: `OnSet`) by the intersection–union rule of
study/stats/across_sets.py. One function gives every declared row its tests, so Holm's correction (fixed
design) and each look's boundary (sequential) read the same p's."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional, Sequence

import numpy as np

from study.read.family import Family
from study.records import ComparisonRow, FindingsTable, SetReading
from study.stats.across_sets import DEPENDS, Across, SetRow, across_test
from study.stats.rules import Rule
from study.terms import RowKey

Tables = Sequence[FindingsTable]


def rule_ps(rule: Rule, r: ComparisonRow, metric: str, family: Family) -> tuple[float, Optional[float]]:
    """A tested row's decision p beyond the tie margin and equivalence p at ±m by `rule`, unadjusted (None:
    its measure has no equivalence margin)."""
    diffs, known, margin = np.array(r.differences), rule.known(r.seed_test), family.equivalence.of(metric)
    p = float(rule.decision_p(diffs, known, family.tie_margin.of(metric)))
    return p, float(rule.equivalence_p(diffs, known, margin)) if margin else None


def rows_by_key(tables: Tables) -> Mapping[RowKey, ComparisonRow]:
    """Every row of `tables` by its key (a look's, or every seed's)."""
    return {r.key: r for t in tables for r in t.rows}


def with_sets(tables: Tables, row: ComparisonRow, rule: Rule, metric: str, family: Family) -> ComparisonRow:
    """A declared row with its reading on each test set its claim spans (unchanged: a claim on its own rows,
    or a row read at a look, which carries that look's sets: `tables` may hold later seeds)."""
    spans = family.across(row.key)
    if not spans or row.sets:
        return row
    by_key = rows_by_key(tables)
    readings = []
    for s in spans:
        on = by_key.get(SetReading(s.name, own=s.own).key(row.key))
        if on is None or on.p_value is None or set(on.seeds) != set(row.seeds):
            readings.append(SetReading(s.name, tested=False, own=s.own))
            continue
        p, p_equivalence = rule_ps(rule, on, metric, family)
        p_equivalence = 1.0 if p_equivalence is None else p_equivalence
        readings.append(SetReading(s.name, on.mean_difference, p, p_equivalence, own=s.own))
    return replace(row, sets=tuple(readings))


def candidate(r: ComparisonRow) -> Across:
    """What a row's sets could say across (its signs: every set one way, opposite ways, or neither)."""
    return across_test([SetRow(s.mean, s.p, s.equivalence_p) for s in r.sets]).candidate


def missing_sets(r: ComparisonRow) -> tuple[str, ...]:
    """The sets a row's across claim spans that lack a tested row of its seeds."""
    return tuple(s.name for s in r.sets if not s.tested)


def declared_tests(
    rule: Rule, r: ComparisonRow, metric: str, family: Family
) -> tuple[Optional[float], Optional[float], int]:
    """A declared row's (decision p, equivalence p, sign) before any adjustment: its own test, or across
    the sets its claim spans (`with_sets` first): the intersection–union p with the common sign, or the
    p of "depends on the test set" with the sign DEPENDS; (None, None, 0) where a set lacks its test."""
    if not r.sets:
        p, p_equivalence = rule_ps(rule, r, metric, family)
        return p, p_equivalence, int(np.sign(r.mean_difference))
    if missing_sets(r):
        return None, None, 0
    test = across_test([SetRow(s.mean, s.p, s.equivalence_p) for s in r.sets])
    equivalence = test.equivalence_p if family.equivalence.of(metric) else None
    if test.candidate is Across.DEPENDS:
        return test.depends_p, equivalence, DEPENDS
    sign = {Across.AHEAD: 1, Across.BEHIND: -1}.get(test.candidate, 0)
    return test.p, equivalence, sign
