"""Wording the findings tables by the family's named rule (study/stats/rules.py): Holm's correction
over the declared family, once over the rule's decision p and once, apart, over the equivalence tests
(study/stats/equivalence.py). A family declared under an older rule also gets the current rule's
reading of each declared row, labelled exploratory (the rule changed after its runs). Each row's
smallest detectable effect and, for a declared row, the power of showing equivalence and the seeds
either would need, by the current rule. A `Reading` per row and rule, in new rows and tables."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from study.judge.across import declared_tests, with_sets
from study.judge.design import FIXED, Design
from study.judge.sequential_findings import Tables, with_rows
from study.read.family import Family, missing_rows
from study.records import ComparisonRow, FindingsTable, Interim, Reading, RowPower, RuleP
from study.stats.equivalence import equivalence_power, seeds_for_equivalence
from study.stats.rules import CURRENT, RULES, Rule
from study.stats.seed_test import ALPHA, detectable_effect, seeds_needed, shared_variance
from study.stats.significance import holm
from study.terms import Measure, Outcome, Table
from utils.run_log import log

Cell = tuple[int, int]  # (table, row) of a row in its tables


def _absent(missing: list[tuple[str, str]]) -> list[Measure]:
    """The measure of each declared comparison without a row: p = 1 in each Holm family it belongs to."""
    return [Table(table).measure for table, _ in missing]


def _holm(ps: list[Optional[float]]) -> list[Optional[float]]:
    """Holm over `ps` (a p of None counts as 1: the family is the size declared; its adjusted p stays None)."""
    adjusted = holm([p if p is not None else 1.0 for p in ps])
    return [a if p is not None else None for p, a in zip(ps, adjusted)]


def _readings(
    tables: Tables, family: Family, rule: Rule, absent: list[Measure], plan: Optional[Interim], design: Design
) -> Mapping[Cell, Reading]:
    """{(table, row): reading} of every row under `rule`: each declared row's decision p and equivalence p,
    each Holm-adjusted over its family, then worded by the design (outcome, finding, why withheld)."""
    cells = [(i, j) for i, t in enumerate(tables) for j in range(len(t.rows))]
    declared = [(i, j) for i, j in cells if tables[i].rows[j].declared]
    p_rule, p_equivalence = {}, {}
    for i, j in declared:
        r = tables[i].rows[j]
        if r.p_value is not None:
            p_rule[i, j], p_equivalence[i, j], _ = declared_tests(rule, r, tables[i].metric, family)
    holm_rule = dict(zip(declared, _holm([p_rule.get(c) for c in declared] + [None] * len(absent))))
    equivalent = [c for c in declared if family.equivalence.of(tables[c[0]].metric)]
    stand_ins = [None for metric in absent if family.equivalence.of(metric)]
    holm_equivalence = dict(zip(equivalent, _holm([p_equivalence.get(c) for c in equivalent] + stand_ins)))
    holm_rule, holm_equivalence = design.adjusted(holm_rule, holm_equivalence)  # (a sequential design: by look)
    worded = {}
    for i, j in cells:
        r, c = tables[i].rows[j], (i, j)
        reading = RuleP(rule.name, p_rule.get(c), holm_rule.get(c), p_equivalence.get(c), holm_equivalence.get(c))
        withheld, said, finding = design.word(r, reading, tables[i].metric, family, plan)
        finding = f"{r.joined_range}; {finding}" if r.joined_range else finding
        worded[c] = reading.worded(said, finding, withheld if said == Outcome.WITHHELD else None)
    return worded


def apply_rule(
    tables: Tables, family: Family, configs: Optional[list[str]] = None, design: Design = FIXED
) -> tuple[tuple[FindingsTable, ...], int]:
    """New tables whose every row has its reading by the family's rule and, a declared row of a family
    under an older rule, the current rule's (`exploratory`); and the family's size (a declared
    comparison without a row counts, as p = 1: `missing_rows`)."""
    marked, rule = with_rows(tables, lambda i, j, r: replace(r, declared=family.declares(r.key))), RULES[family.rule]

    def spanned(i: int, j: int, r: ComparisonRow) -> ComparisonRow:  # a declared row with its sets' readings
        return with_sets(marked, r, rule, marked[i].metric, family) if r.declared else r

    def by_rule(i: int, j: int, r: ComparisonRow) -> ComparisonRow:  # before the wording, which quotes it
        if rule.veto and r.p_value is not None:  # the older rule's SE, in a field of its own
            return replace(
                r, tested=replace(r.tested, seed_test=replace(r.seed_test, se_seed_veto=rule.se(r.seed_test)))
            )
        if rule.own_interval and r.p_value is not None:  # the interval by the rule's own t (n - 1 df)
            low, high = rule.interval(r.seed_test)
            return replace(r, tested=replace(r.tested, seed_test=replace(r.seed_test, low=low, high=high)))
        return r

    tables = with_rows(with_rows(marked, spanned), by_rule)
    missing = missing_rows(tables, family, configs)
    absent, plan = _absent(missing), design.interim(tables, family, len(missing))
    readings = _readings(tables, family, rule, absent, plan, design)
    older = rule is not CURRENT and not design.current_reads_apart  # (a sequential family's: report.py)
    current = _readings(tables, family, CURRENT, absent, plan, design) if older else {}

    declared = sum(r.declared for t in tables for r in t.rows)
    judged = with_rows(tables, lambda i, j, r: r.judged(readings[i, j], current.get((i, j)) if r.declared else None))
    return judged, declared + len(missing)


def check_entries(tables: Tables, family: Family) -> None:
    """A declared entry whose table has rows but none compared on its label is a typo (`test sett`, a
    non-breaking space): refused in one line naming the labels there are, never a smaller family."""
    from settings.config import ConfigError

    for i, h in enumerate(family.headline):
        keys = [r.key for t in tables if t.name == h.table for r in t.rows]
        if keys and not any(h.names(key) for key in keys):
            labels = sorted({key.label for key in keys})
            raise ConfigError(
                f"{family.path}: headline[{i}].compared_on {h.compared_on!r} is no row of the {h.table} table "
                f"(its rows: {', '.join(map(repr, labels))}); correct it: a declared comparison that matches "
                f"nothing would leave the family smaller than declared"
            )


def unmatched(tables: Tables, family: Family) -> list[str]:
    """The headline entries that match no row (a typo, or a measure these runs did not record)."""
    return [h.as_written() for h in family.headline if not any(h.matches(r.key) for t in tables for r in t.rows)]


def row_power(
    r: ComparisonRow, metric: str, alpha: float, alpha_equivalence: float, family: Family
) -> Optional[RowPower]:
    """A tested row's planning figures by the current rule: the smallest true difference its seeds word as
    a direction 80% of the time (two-sided at `alpha`, beyond the tie margin) and the seeds the declared
    effect would need; a declared row with an equivalence margin, the power of showing equivalence if the
    true difference were 0 and the seeds that would need."""
    t = r.seed_test
    if not t or t.se is None:
        return None
    shared, tie, welch = shared_variance(t), family.tie_margin.of(metric), CURRENT.welch
    level = CURRENT.two_sided(alpha)  # the two-sided t level a decision at alpha asks
    effect = family.effect.of(metric)
    power = RowPower(
        detectable_effect(t.se, CURRENT.df(t), level, tie),
        seeds_needed(effect, t.seed_sd, shared, level, tie, welch=welch),
    )
    margin = family.equivalence.of(metric)
    if not (r.declared and margin):
        return power
    return replace(
        power,
        equivalence_power=equivalence_power(margin, t.seed_sd, t.n, shared, alpha_equivalence, welch=welch),
        seeds_for_equivalence=seeds_for_equivalence(margin, t.seed_sd, shared, alpha_equivalence, welch=welch),
    )


def word_tables(
    tables: Tables, family: Family, configs: Optional[list[str]] = None, design: Design = FIXED
) -> tuple[tuple[FindingsTable, ...], int, list[str], Optional[Interim]]:
    """Every row worded by the rule and the design, with its power at Holm's first step (each table's
    `alpha`): (the new tables, the family's size, the declared entries no row matched, the interim plan)."""
    check_entries(tables, family)
    tables, size = apply_rule(tables, family, configs, design)
    unmatched_entries = unmatched(tables, family)
    for entry in unmatched_entries:
        log(f"compare.py: the declared headline comparison {entry} of {family.path} matches no row of these runs")
    if family.path and family.rule != CURRENT.name:
        log(
            f"compare.py: {family.path} is decided by rule {family.rule} (the rule it was declared under; a file "
            f"naming none was declared before rules had names), with the current rule's reading beside it, "
            f"labelled exploratory; a new family names `rule: {CURRENT.name}`"
        )
    missing = missing_rows(tables, family, configs)
    alpha = ALPHA / size if size else ALPHA  # Holm's first step: what the strongest declared row must pass
    measures = [t.metric for t in tables for r in t.rows if r.declared] + _absent(missing)
    equivalent = sum(bool(family.equivalence.of(m)) for m in measures)  # the equivalence tests' Holm family
    alpha_equivalence = ALPHA / equivalent if equivalent else ALPHA  # the same for the equivalence family
    worded = tuple(
        replace(
            t,
            rows=tuple(replace(r, power=row_power(r, t.metric, alpha, alpha_equivalence, family)) for r in t.rows),
            family_rows=sum(r.declared for r in t.rows),
            alpha=alpha,
        )
        for t in tables
    )
    return worded, size, unmatched_entries, design.interim(worded, family, len(missing))
