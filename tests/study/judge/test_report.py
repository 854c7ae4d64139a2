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


def test_a_row_is_found_by_table_configuration_and_comparison() -> None:
    from types import SimpleNamespace

    from study.judge.report import find_row
    from study.records import ComparisonRow, FindingsTable

    row = ComparisonRow(config="demo/rope", compared_on="k=4")
    tables = (FindingsTable("test", "", "sacreBLEU", ()), FindingsTable("concat", "", "sacreBLEU", (row,)))
    findings = SimpleNamespace(tables=tables)
    assert find_row(findings, "concat", "demo/rope", "k=4") is row
    assert find_row(findings, "test", "demo/rope", "k=4") is None
    assert find_row(findings, "concat", "demo/learnable", "k=4") is None
    assert find_row(findings, "buckets", "demo/rope", "k=4") is None


def test_the_findings_p_is_copied_into_new_configurations(tmp_path: Path) -> None:
    groups = group_runs([run(tmp_path, "s", "b", 1, "sinusoidal"), run(tmp_path, "r", "a", 1)])
    from types import SimpleNamespace

    from study.records import ComparisonRow, FindingsTable
    from study.stats.seed_test import SeedTest

    tested = ComparisonRow("r", "test set", seed_test=SeedTest(2, 0.1, 0.1, 0.01, 0.1, 0.25, None, None))
    findings = SimpleNamespace(tables=(FindingsTable("test", "test set", "sacreBLEU", (tested,)),))
    base, rope = add_significance(groups, groups[0], findings)
    assert rope.p_value == 0.25 and base.p_value is None and groups[1].p_value is None
