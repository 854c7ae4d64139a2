"""A declared comparison whose claim spans the family's test sets (study/judge/across.py, issue 78): the
own split's row carries the verdict, read from its rows on every declared set by the intersection–union
rule (study/stats/across_sets.py) through Holm as any declared p; opposite directions are worded "depends
on the test set", naming each set's way; a set without a test of every seed withholds the verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import AHEAD, BEHIND, across_family, across_findings, finding_row

from study.judge.verdicts import word_tables
from study.records import FindingsTable
from study.terms import Outcome, RowKey, Table, WholeTestSet


def judged(own: list[float], news: list[float] | None, claim: str = "across", family=None):
    """The declared own-split row of configuration `a` and, unless None, its row on `news`, worded (by
    `family`, default `across_family(claim)`)."""
    rows = [finding_row(own, v_shared=0.001)]
    if news is not None:
        on_news = finding_row(news, v_shared=0.001)
        rows.append(replace(on_news, key=RowKey(Table.TEST, "a", WholeTestSet("news"))))
    test = FindingsTable("test", "test set", "sacreBLEU", tuple(rows))
    tables, size, _, _ = word_tables([test], family or across_family(claim), ["a"])
    declared = [r for r in tables[0].rows if r.declared]
    assert size == 1 and len(declared) == 1  # one comparison: the sets cost no multiplicity
    return declared[0]


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


def test_the_headline_shows_each_set_beside_the_verdict():
    from study.pages.headline import headline_markdown

    findings = across_findings()
    page = headline_markdown(findings)
    assert "depends on the test set: ahead on own, behind on news" in page
    assert "| `a` | own | +2.03 [" in page and "| `a` | news | -2.03 [" in page  # each set's own row
    assert "| `a` | test set own (BLEU) | +2.03 [" in page  # the declared row's Δ: its own split's, so named
    assert "By test set" not in headline_markdown(across_findings("per_set"))
    # the findings table: the set's row is part of the declared claim (not "not declared")
    from study.pages.findings_markdown import table_markdown
    from study.pages.headline import sentences_markdown

    table = table_markdown(findings.tables[0], findings)
    assert "| a | test set own (n=100) |" in table  # the declared row names its own split, as the headline does
    assert "- `a` against `b`, test set own: mean difference" in sentences_markdown(findings)  # and in full
    news_row = next(x for x in table.splitlines() if "| test set news (n=" in x)
    assert "| in the declared claim across the test sets (its `test set own` row) |" in news_row, news_row
    per_set = across_findings("per_set")
    assert "| not declared |" in next(
        x for x in table_markdown(per_set.tables[0], per_set).splitlines() if "| test set news (n=" in x
    )
    # a set without its test: the family line says so (not "interim or not from the declaring commit")
    line = next(x for x in headline_markdown(across_findings(news_tested=False)).splitlines() if "Declared" in x)
    assert "1 without a verdict (interim, not from the declaring commit, or a declared test set without the " in line
    assert line.endswith("test of some seed: news).")


def test_a_sequential_look_tests_the_claim_across_and_waits_for_every_set():
    """Each look's tests (`look_tests`) read the declared row across its sets, as Holm does in a fixed study:
    the intersection–union p with the common sign, "depends" (its sign DEPENDS) where the sets go opposite
    ways; a look whose seeds a set's row lacks is not reached (`_reached`), so a missing test spends no look."""
    from study.judge.sequential_findings import _reached, look_tests
    from study.stats.across_sets import DEPENDS

    planned = across_family().model_copy(update={"seeds": tuple(range(6)), "looks": (6,)})

    def tables(own: list[float], news: list[float]):
        on_news = replace(finding_row(news, v_shared=0.001), key=RowKey(Table.TEST, "a", WholeTestSet("news")))
        return [FindingsTable("test", "test set", "sacreBLEU", (finding_row(own, v_shared=0.001), on_news))]

    key = RowKey(Table.TEST, "a", WholeTestSet())
    both = look_tests(tables(AHEAD, [x / 2 for x in AHEAD]), planned, [key])
    alone = look_tests([FindingsTable("test", "test set", "sacreBLEU", (finding_row(AHEAD, v_shared=0.001),))],
                       across_family("per_set"), [key])  # fmt: skip
    assert both.sign == (1,) and both.decision_p[0] > alone.decision_p[0]  # the larger p: news's, not the own
    assert look_tests(tables(AHEAD, BEHIND), planned, [key]).sign == (DEPENDS,)
    assert _reached(tables(AHEAD, AHEAD), planned, range(6), [key], ["a"])
    assert not _reached(tables(AHEAD, AHEAD[:5]), planned, range(6), [key], ["a"])  # news lacks seed 5


def test_equivalence_across_is_worded_across_the_sets():
    """'equivalent across' (TOST on every set) says so, in the findings and on the headline page alike."""
    from study.pages.headline import short_verdict
    from study.read.family import Equivalence

    near = [0.05, -0.05, 0.02, -0.02, 0.04, -0.04]
    family = across_family().model_copy(update={"equivalence": Equivalence(sacreBLEU=1.0)})
    row = judged(near, [-x for x in near], family=family)
    assert row.reading.outcome == Outcome.EQUIVALENT
    assert row.finding.startswith("equivalent within ±1.00 BLEU across the declared test sets (own, news) (")
    cell = short_verdict(row.reading, row, "sacreBLEU", 0.1, 1.0)
    assert cell.startswith("equivalent within ±1.00 BLEU across the declared test sets (own, news) (equivalence")


def test_between_looks_the_row_keeps_the_sets_read_at_its_look():
    """Once seeds of the next look are in on every set, the declared row shown is the last look's, read
    across the sets at that look: its sets are not read again against every seed archived (which withheld
    it as if a set lacked a seed's test, on the interim page and in a verdict decided at an earlier look)."""
    from study.judge.design import design_for
    from study.terms import Withholding

    planned = across_family().model_copy(update={"seeds": tuple(range(8)), "looks": (6, 8)})
    own, news = [0.3, -0.1, 0.2, 0.05, 0.15, -0.05, 0.1], [0.2, 0.1, -0.1, 0.3, 0.0, 0.1, -0.2]  # open at look 1

    def build(seeds):
        n = 7 if seeds is None else len(seeds)  # 7 seeds archived: the first look's 6 and one more
        on_news = replace(finding_row(news[:n], v_shared=0.001), key=RowKey(Table.TEST, "a", WholeTestSet("news")))
        return (FindingsTable("test", "test set", "sacreBLEU", (finding_row(own[:n], v_shared=0.001), on_news)),)

    tables, design = design_for(planned).read(build, planned, ["a"])
    worded = word_tables(tables, planned, ["a"], design)[0][0].rows
    row = next(r for r in worded if r.declared)
    assert row.look.look == 1 and len(row.seeds) == 6 and all(s.tested for s in row.sets)
    on_news = next(r for r in worded if r.key.on == WholeTestSet("news"))
    assert len(on_news.seeds) == 6  # the set's row shown beside it: at the same look (its page table and plot)
    assert row.reading.withheld is None or row.reading.withheld.why != Withholding.MISSING_SET, row.finding


def test_at_a_look_each_set_shows_its_repeated_interval_beside_the_verdict():
    """A sequential plan's by-test-set table gives each set's repeated 95% interval at the declared row's
    look and level (the own split's equals the headline's), so named; a fixed design's, the plain one."""
    from study.judge.design import FIXED, design_for
    from study.judge.report import findings_report
    from study.pages.headline import headline_markdown

    planned = across_family().model_copy(update={"seeds": tuple(range(8)), "looks": (6, 8)})
    own, news = [0.3, -0.1, 0.2, 0.05, 0.15, -0.05], [0.2, 0.1, -0.1, 0.3, 0.0, 0.1]  # open at look 1

    def build(seeds):
        on_news = replace(finding_row(news, v_shared=0.001), key=RowKey(Table.TEST, "a", WholeTestSet("news")))
        return (FindingsTable("test", "test set", "sacreBLEU", (finding_row(own, v_shared=0.001), on_news)),)

    tables, design = design_for(planned).read(build, planned, ["a"])
    worded, size, missing, plan = word_tables(tables, planned, ["a"], design)
    row = next(r for t in worded for r in t.rows if r.declared)
    on_news = next(r for t in worded for r in t.rows if r.key.on == WholeTestSet("news"))
    own_set, news_set = row.sets
    assert own_set.repeated == row.look.repeated
    plain = (on_news.seed_test.low, on_news.seed_test.high)
    assert news_set.repeated[0] < plain[0] and news_set.repeated[1] > plain[1]  # wider: look 1's level
    assert design.set_interval(news_set, on_news) == news_set.repeated
    assert FIXED.set_interval(news_set, on_news) == plain
    page = headline_markdown(
        design.record(findings_report("b", planned.at("f.yaml"), size, missing, 9, 1, worded, plan))
    )
    low, high = row.look.repeated
    assert "| comparison | test set | Δ [repeated 95% interval] |" in page
    assert f"| `a` | own | +0.09 [{low:+.2f}, {high:+.2f}] |" in page
    # the findings table: the set's row has its claim's design's figures (none of a fixed design's)
    from study.pages.findings_markdown import table_markdown

    record = design.record(findings_report("b", planned.at("f.yaml"), size, missing, 9, 1, worded, plan))
    news_row = next(x for x in table_markdown(record.tables[0], record).splitlines() if "| test set news (n=" in x)
    assert "| in the declared claim across the test sets (its `test set own` row) | – | – (sequential) |" in news_row
    # and its finding names both intervals as the declared row's does: the plain one naive, then the repeated one
    naive = f"naive 95% interval {plain[0]:+.2f} to {plain[1]:+.2f}"
    again = f"repeated 95% interval {news_set.repeated[0]:+.2f} to {news_set.repeated[1]:+.2f}"
    assert on_news.finding.endswith(f"{naive}; {again}"), on_news.finding
    assert f"| {on_news.finding} |" in news_row
