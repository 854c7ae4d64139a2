"""The findings report (study/judge/report.py): a row looked up by table, configuration and comparison;
the findings' p copied back into new configurations (the report itself: tests/study/judge/test_findings.py,
test_sequential_findings.py, tests/study/pages/test_headline.py)."""

from __future__ import annotations

from pathlib import Path

from study.judge.report import add_significance
from study.read.run_groups import group_runs
from study.records import RunRecord, frozen_map


def run(tmp_path: Path, name: str, key: str, seed: int, encoding: str = "rope") -> RunRecord:
    scores = frozen_map({"sacrebleu": 20.0 + seed})
    return RunRecord(run=str(tmp_path / name), seed=seed, name=name, group_key=key, encoding=encoding, scores=scores)


def test_a_row_is_found_by_its_key_table_configuration_and_selection() -> None:
    from dataclasses import replace

    from study.judge.report import findings_report
    from study.read.family import NO_FAMILY
    from study.records import ComparisonRow, FindingsTable
    from study.terms import Joined, LengthBucket, RowKey, WholeTestSet

    row = ComparisonRow(RowKey("concat", "demo/rope", Joined(4)))
    tables = (FindingsTable("test", "", "sacreBLEU", ()), FindingsTable("concat", "", "sacreBLEU", (row,)))
    findings = findings_report("demo/sinusoidal", NO_FAMILY, 0, (), 10, 1, tables)
    assert findings.row(RowKey("concat", "demo/rope", Joined(4))) is row and row.compared_on == "k=4"
    assert findings.row(RowKey("test", "demo/rope", Joined(4))) is None
    assert findings.row(RowKey("concat", "demo/learnable", Joined(4))) is None
    assert findings.row(RowKey("concat", "demo/rope", Joined(2))) is None
    # a bucket named like a k is no k: rows are told apart by their selection, not their label's words
    assert findings.row(replace(row.key, on=LengthBucket("k=4"))) is None
    assert findings.row(RowKey("concat", "demo/rope", WholeTestSet())) is None


def test_the_findings_p_is_copied_into_new_configurations(tmp_path: Path) -> None:
    groups = group_runs([run(tmp_path, "s", "b", 1, "sinusoidal"), run(tmp_path, "r", "a", 1)])
    from study.judge.report import findings_report
    from study.read.family import NO_FAMILY
    from study.records import ComparisonRow, FindingsTable, RowTest
    from study.stats.seed_test import SeedTest
    from study.terms import RowKey, WholeTestSet

    test = SeedTest(2, 0.1, 0.1, 0.01, 0.1, 0.25, None, None)
    tested = ComparisonRow(RowKey("test", "r", WholeTestSet()), tested=RowTest(0.1, test))
    tables = (FindingsTable("test", "test set", "sacreBLEU", (tested,)),)
    findings = findings_report("s", NO_FAMILY, 0, (), 10, 1, tables)
    base, rope = add_significance(groups, groups[0], findings)
    assert rope.p_value == 0.25 and base.p_value is None and groups[1].p_value is None
