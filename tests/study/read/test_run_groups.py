"""The group stage (study/read/run_groups.py): runs grouped into configurations by their group key, in
order of first appearance and by seed, labels told apart where two share a name; the baseline picked
and marked."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.read.run_groups import group_runs, mark_baseline, pick_baseline
from study.read.run_records import CompareError
from study.records import RunRecord, frozen_map


def run(tmp_path: Path, name: str, key: str, seed: int, encoding: str = "rope") -> RunRecord:
    scores = frozen_map({"sacrebleu": 20.0 + seed})
    return RunRecord(run=str(tmp_path / name), seed=seed, name=name, group_key=key, encoding=encoding, scores=scores)


def test_runs_are_grouped_by_key_and_seed_and_labels_told_apart(tmp_path: Path) -> None:
    rows = [
        run(tmp_path, "demo/rope_seed2", "a", 2),
        run(tmp_path, "demo/sinusoidal", "b", 1, "sinusoidal"),
        run(tmp_path, "demo/rope_seed1", "a", 1),
        run(tmp_path / "other", "demo/rope", "c", 1),  # another configuration named like the first
    ]
    groups = group_runs(rows)
    assert [g.seeds for g in groups] == [(1, 2), (1,), (1,)]
    assert groups[0].label == f"demo/rope ({tmp_path}/demo/rope)" and groups[1].label == "demo/sinusoidal"
    assert groups[0].mean("sacrebleu") == 21.5 and groups[0].n == 2
    assert pick_baseline(groups, None) is groups[1] and pick_baseline(groups, "sinusoidal") is groups[1]
    with pytest.raises(CompareError, match="matches no configuration"):
        pick_baseline(groups, "alibi")
    marked = mark_baseline(groups, groups[1])
    assert [g.is_baseline for g in marked] == [False, True, False] and not any(g.is_baseline for g in groups)
