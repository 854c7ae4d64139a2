"""Wording the findings (study/judge/verdicts.py): the four outcomes of a declared row, a declared
configuration without rows counted in Holm and keeping the study interim, each row's power at its
family's alpha."""

from __future__ import annotations

from dataclasses import replace

import pytest
from scipy import stats

from study.judge.verdicts import apply_rule, word_tables
from study.judge.wording import verdict
from study.read.family import Family
from study.records import FindingsTable, RuleP
from study.stats.equivalence import equivalence_power
from study.stats.rules import CURRENT
from study.stats.seed_test import ALPHA, detectable_effect
from study.stats.significance import holm
from study.terms import ALL_K, RowKey
from tests.helpers import finding_row


def _family() -> Family:
    return Family(
        headline=[{"table": "test", "compared_on": "test set"}], equivalence={"sacreBLEU": 1.0}, rule=CURRENT.name
    )


def _row(diffs: list[float], v_sent: float = 0.001, config: str = "a"):
    return finding_row(diffs, v_sent / 2, v_sent / 2 * len(diffs), config)


def test_the_four_outcomes_are_worded():
    rows = (
        _row([0.05, -0.04, 0.02, 0.01, -0.03, 0.0], config="close"),  # equivalent
        _row([3.0, 3.2, 2.9, 3.1, 3.05, 2.95], config="far"),  # ahead
        _row([0.30, 0.32, 0.29, 0.31, 0.30, 0.31], config="small"),  # both
        _row([2.0, -2.5, 1.5, -1.0, 3.0, -2.0], config="noisy"),  # neither
    )
    tables = [FindingsTable("test", "test set", "sacreBLEU", rows)]
    worded, _ = apply_rule(tables, _family())
    assert tables == [FindingsTable("test", "test set", "sacreBLEU", rows)]  # its input as it was
    close, far, small, noisy = (r.finding for r in worded[0].rows)
    assert close.startswith("equivalent within ±1.00 BLEU (equivalence Holm p")
    assert far.startswith("ahead by more than 0.10 BLEU") and "equivalent" not in far
    assert small.startswith("ahead by more than 0.10 BLEU") and "and equivalent within ±1.00 BLEU" in small
    assert "a small difference inside the margin" in small
    assert noisy.startswith("inconclusive: no direction") and "not shown equivalent within ±1.00 BLEU" in noisy
    # interim: the same rows word no verdict while a planned seed is missing
    planned = _family().model_copy(update={"seeds": tuple(range(8))})
    worded, _ = apply_rule(tables, planned)
    assert all(r.finding.startswith("interim (6 of 8 planned seeds): no verdict") for r in worded[0].rows)
    # a row whose runs were not trained from a commit that declared the family: descriptive
    unproven = (rows[0], replace(rows[1], from_declaring_commit=False), *rows[2:])
    worded, _ = apply_rule([FindingsTable("test", "test set", "sacreBLEU", unproven)], _family())
    assert worded[0].rows[1].finding.startswith("descriptive: not every run")
    reading = RuleP("beyond_tie")
    assert verdict(_row([1.0, 1.0]), reading, "sacreBLEU", 0.1, declared=False).startswith("seeds:")


def test_a_finding_quotes_the_interval_its_headline_and_table_show():
    """Under a rule with its own interval (n - 1 df) every row's finding quotes that interval, the one
    its headline cell and its findings JSON give, not the seed test's Welch interval it replaced."""
    from study.judge.design import FIXED

    rows = (_row([0.8, 1.6, 0.2, 1.1, 0.5, 1.9], config="far"), replace(_row([0.3, -0.2, 0.6, 0.1]), declared=False))
    worded, _ = apply_rule([FindingsTable("test", "test set", "sacreBLEU", rows)], _family())
    assert CURRENT.own_interval
    for before, after in zip(rows, worded[0].rows):
        low, high = CURRENT.interval(before.seed_test)
        assert (after.seed_test.low, after.seed_test.high) == FIXED.interval(after) == (low, high)
        assert (low, high) != (before.seed_test.low, before.seed_test.high)  # (Welch's df: another interval)
        assert after.finding.endswith(f"95% interval {low:+.2f} to {high:+.2f}"), after.finding


def test_a_declared_configuration_without_rows_counts_in_holm_and_keeps_the_study_interim():
    """A declared configuration not run yet (or without the baseline's seeds) has no row: it still counts
    in Holm's family (as p = 1), and a planned study stays interim (it holds none of the seeds)."""
    entry = {"table": "test", "compared_on": "test set", "configs": ["a", "b"]}
    tables = [FindingsTable("test", "test set", "sacreBLEU", (_row([3.0, 3.2, 2.9, 3.1, 3.05, 2.95]),))]

    def apply(family: Family, configs=None):
        worded, size = apply_rule(tables, family, configs)
        return size, worded[0].rows[0]

    size, a = apply(Family(headline=[entry], rule=CURRENT.name))
    assert size == 2 and a.p_holm == pytest.approx(min(1.0, 2 * a.reading.p_rule))  # the decision p (beyond ±tie)
    planned = Family(headline=[entry], seeds=list(range(6)), rule=CURRENT.name)
    size, a = apply(planned)
    assert size == 2 and a.finding.startswith("interim (6 of 6 planned seeds)")
    # an entry naming no configs: checked against the compared configurations, when they are given
    every = Family(headline=[{"table": "test", "compared_on": "test set"}], seeds=list(range(6)), rule=CURRENT.name)
    size, a = apply(every, ["a"])
    assert size == 1 and a.outcome == "direction"
    size, a = apply(every, ["a", "c"])
    assert size == 2 and a.outcome == "withheld"


def test_each_row_prints_its_power_at_its_family_alpha():
    """Through word_tables, as compare.py prints them: the detectable effect at Holm's first step of the
    difference family (3 declared rows), the equivalence power at that of the equivalence family (the 2
    rows whose measure has a margin), from the row's own seed SD and test-set variance."""
    family = Family(
        headline=[
            {"table": "test", "compared_on": "test set"},
            {"table": "degradation", "compared_on": "degradation, all k", "configs": ["a"]},
        ],
        equivalence={"sacreBLEU": 1.0},
        rule=CURRENT.name,
    )
    test_rows = (_row([0.1, -0.2, 0.3, 0.0, 0.1], 0.01, "a"), _row([1.0, 1.2, 0.8, 1.1, 0.9], 0.01, "b"))
    nll = _row([0.01, 0.02, 0.0, 0.01, 0.02], 1e-5, "a")
    nll = replace(nll, key=RowKey("degradation", "a", ALL_K))
    tables = [
        FindingsTable("test", "test set", "sacreBLEU", test_rows),
        FindingsTable("degradation", "degradation", "NLL", (nll,)),
    ]
    tables, size, _, plan = word_tables(tables, family, ["a", "b"])
    assert size == 3 and plan is None
    a = tables[0].rows[0]
    t = a.seed_test
    # the current rule's interval: Student's t at n - 1 df (not the Welch df the seed test carries)
    half = stats.t.isf(ALPHA / 2, t.n - 1) * t.se
    assert (t.low, t.high) == pytest.approx((t.mean - half, t.mean + half)) and t.df > t.n - 1
    # the current rule's: Student's t at n - 1 df, both tails on an edge (the two-sided level halved)
    assert a.power.detectable == pytest.approx(detectable_effect(t.se, t.n - 1, ALPHA / 3 / 2, 0.1))
    want = equivalence_power(1.0, t.seed_sd, t.n, t.v_shared, ALPHA / 2, welch=False)
    assert a.power.equivalence_power == pytest.approx(want)
    assert tables[1].rows[0].power.equivalence_power is None  # NLL: no margin declared, no equivalence test
    b = tables[0].rows[1]
    adjusted = holm([a.reading.p_equivalence, b.reading.p_equivalence])
    assert [a.reading.p_equivalence_holm, b.reading.p_equivalence_holm] == pytest.approx(adjusted)
    assert tables[1].rows[0].reading.p_equivalence is None  # the equivalence family is apart: NLL has no margin


def test_an_entry_no_row_matches_is_named_as_the_file_writes_it():
    """Issue 76: the findings name a declared entry that matched no row as the mapping the file gives
    (its keys given, in the schema's order; lists as lists), as when entries were dicts: the text
    summary_findings.json holds for it does not change with the entries typed."""
    family = Family(
        headline=[{"table": "test", "compared_on": "test set"}, {"configs": ["b"], "table": "concat"}],
        rule=CURRENT.name,
    )
    tables = [FindingsTable("test", "test set", "sacreBLEU", (_row([3.0, 3.2, 2.9]),))]
    _, _, unmatched, _ = word_tables(tables, family)
    assert unmatched == ["{'table': 'concat', 'configs': ['b']}"]
