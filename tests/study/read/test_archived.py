"""An archived study read back for the simulations (study/read/archived.py): the declared sacreBLEU rows
of its findings JSON with their table, and those compared on the whole test set told by their table,
never by the words of their label."""

from __future__ import annotations

import json
from pathlib import Path

from study.read.archived import declared_rows, rows_on_test_set

ROOT = Path(__file__).resolve().parents[3]


def test_the_test_set_rows_are_those_of_the_test_table(tmp_path: Path) -> None:
    rows, tie = declared_rows(ROOT / "results/demo/summary_findings.json")
    assert tie == 0.1 and [(r.table, r.name) for r in rows_on_test_set(rows)] == [
        ("test", "demo/learnable, test set"),
        ("test", "demo/rope, test set"),
    ]
    assert {r.table for r in rows} == {"test", "concat"}  # the declared k=4 rows are not on the test set
    # a bucket whose label ends like the test set's is still a bucket's row
    seed_test = {"mean": 1.0, "seed_sd": 0.5, "v_shared": 0.01, "v_int": 0.02}
    row = {"config": "a", "compared_on": "whole test set", "declared": True, "seed_test": seed_test}
    findings = {"tie_margin": {"sacreBLEU": 0.1}, "tables": [{"name": "buckets", "metric": "sacreBLEU", "rows": [row]}]}
    (tmp_path / "f.json").write_text(json.dumps(findings))
    rows, _ = declared_rows(tmp_path / "f.json")
    assert len(rows) == 1 and rows_on_test_set(rows) == []
