"""A declared comparison whose claim spans the family's test sets (study/judge/across.py, issue 78): the
own split's row carries the verdict, read from its rows on every declared set by the intersection–union
rule (study/stats/across_sets.py) through Holm as any declared p; opposite directions are worded "depends
on the test set", naming each set's way; a set without a test of every seed withholds the verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import finding_row

from study.judge.verdicts import word_tables
from study.read.family import Family
from study.records import FindingsTable
from study.stats.rules import CURRENT
from study.terms import Outcome, RowKey, Table, WholeTestSet

SIDES = {"src": "0" * 64, "ref": "1" * 64}


def family(claim: str = "across") -> Family:
    return Family(
        headline=[{"table": "test", "compared_on": "test set", "claim": claim}],
        rule=CURRENT.name,
        test_sets=[{"name": "own"}, {"name": "news", "src": "n.fr", "ref": "n.en", "sha256": SIDES}],
    )


def judged(own: list[float], news: list[float] | None, claim: str = "across"):
    """The declared own-split row of configuration `a` and, unless None, its row on `news`, worded."""
    rows = [finding_row(own, v_shared=0.001)]
    if news is not None:
        on_news = finding_row(news, v_shared=0.001)
        rows.append(replace(on_news, key=RowKey(Table.TEST, "a", WholeTestSet("news"))))
    tables, size, _, _ = word_tables([FindingsTable("test", "test set", "sacreBLEU", tuple(rows))], family(claim), ["a"])
    declared = [r for r in tables[0].rows if r.declared]
    assert size == 1 and len(declared) == 1  # one comparison: the sets cost no multiplicity
    return declared[0]


AHEAD = [2.0, 2.2, 1.9, 2.1, 2.05, 1.95]
BEHIND = [-2.0, -2.2, -1.9, -2.1, -2.05, -1.95]
NOTHING = [0.3, -0.4, 0.1, -0.2, 0.35, -0.1]


def test_a_direction_across_holds_on_every_set_and_its_p_is_the_largest():
    row = judged(AHEAD, [x / 2 for x in AHEAD])
    assert row.reading.outcome == Outcome.DIRECTION
    assert row.reading.p_rule == pytest.approx(max(s.p for s in row.sets))  # intersection–union: the largest
    assert "ahead by more than 0.10 BLEU across the declared test sets (own, news)" in row.finding
    assert "by test set: own +2.03 (p " in row.finding and ", news +1.02 (p " in row.finding


def test_a_direction_on_one_set_only_is_no_direction_across():
    row = judged(AHEAD, NOTHING)
    assert row.reading.outcome != Outcome.DIRECTION and row.reading.p_rule > 0.05
    assert judged(AHEAD, NOTHING, claim="per_set").reading.outcome == Outcome.DIRECTION  # (its own row alone)


def test_opposite_directions_are_worded_depends_on_the_test_set():
    row = judged(AHEAD, BEHIND)
    assert row.reading.outcome == Outcome.DEPENDS
    assert row.finding.startswith("depends on the test set: ahead on own, behind on news (Holm p ")


def test_a_set_without_the_comparison_withholds_its_verdict():
    row = judged(AHEAD, None)
    assert row.reading.outcome == Outcome.WITHHELD
    assert row.finding.startswith("descriptive: not every seed of it is tested on the declared test set(s) news")
