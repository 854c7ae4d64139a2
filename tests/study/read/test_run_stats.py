"""Statistics over compared runs (study/read/run_stats.py): mean and sample std, same-seed wins over
a margin, training minutes over resumed sessions, the joined-pair training range of a k, and the
test.py command that writes a damaged test output again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from settings.config import from_raw
from study.read.run_files_read import log_lines
from study.read.run_stats import joined_training_k, mean_std, retest_hint, seed_wins, training_minutes
from study.records import RunRecord
from study.terms import joined_range


def test_mean_and_sample_std_skip_missing_values() -> None:
    assert mean_std([]) == (None, None, 0) and mean_std([None]) == (None, None, 0)
    assert mean_std([3.0, None]) == (3.0, None, 1)  # one value: no std
    mean, std, n = mean_std([1.0, 2.0, 4.0])
    assert n == 3 and mean == pytest.approx(7 / 3) and std == pytest.approx(1.5275252, rel=1e-6)


def test_seed_wins_count_same_seed_pairs_above_the_margin() -> None:
    runs = [RunRecord(run="r", seed=s, valid_loss=b) for s, b in ((1, 30.0), (2, 29.0), (3, 31.0), (4, None))]
    base = [RunRecord(run="b", seed=s, valid_loss=b) for s, b in ((1, 29.5), (2, 29.0), (3, 30.95), (5, 40.0))]
    # shared scored seeds 1, 2, 3: +0.5, a tie, +0.05
    assert seed_wins(runs, base, lambda r: r.valid_loss) == (2, 3)
    assert seed_wins(runs, base, lambda r: r.valid_loss, margin=0.1) == (1, 3)
    assert seed_wins(runs[3:], base, lambda r: r.valid_loss) is None  # no scored seed shared


def test_training_minutes_add_up_every_session_of_a_resumed_run() -> None:
    records = [
        {"event": "start", "time": 0.0},
        {"event": "step", "time": 30.0},
        {"event": "end", "train_seconds": 120.0},
        {"event": "start", "time": 1000.0},  # resumed, stopped without an end record
        {"event": "step", "time": 1060.0},
    ]
    assert training_minutes(log_lines(records)) == pytest.approx(3.0)
    assert training_minutes(log_lines([{"event": "start", "time": 5.0}])) is None


def test_the_joined_training_range_of_a_k() -> None:
    def trained(**joins) -> RunRecord:
        return RunRecord(run="r", config=from_raw({"data": {"train_concat": joins}}))

    assert joined_training_k(RunRecord(run="r")) == 1
    assert joined_training_k(trained(prob=0.5, max_k=4)) == 4
    assert joined_training_k(trained(prob=0.5)) == 2
    assert joined_range(1, 8) is None and joined_range(4, 1) is None
    assert joined_range(4, 4).startswith("inside the joined training range (k <= 4)")
    assert joined_range(4, 8) == "beyond the joined training range (k > 4)"
    assert joined_range(4, None).startswith("pools k inside and beyond")


def test_the_retest_hint_is_the_command_to_run_as_it_stands(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "rope"
    (run / "test").mkdir(parents=True)
    (run / "config.yaml").write_text("name: rope\n")
    assert retest_hint(run / "test" / "hypotheses.txt") == (
        f"test the run again (python test.py --run {run} --overwrite) or leave it out"
    )
    variant = run / "test_ntk4"
    variant.mkdir()
    (variant / "scores.json").write_text(json.dumps({"test_time_overrides": {"model.positional.scaling": "ntk"}}))
    hint = retest_hint(variant / "scores.json")
    assert f"--output {variant} --set 'model.positional.scaling=\"ntk\"' --overwrite" in hint
    gone = run / "test_gone"
    gone.mkdir()  # a variant whose scores.json (its settings) is lost with the damage
    assert (
        retest_hint(gone / "x") == f"delete {gone} and test the variant again (sweep.py --variant) or leave the run out"
    )
    assert retest_hint(tmp_path / "elsewhere").startswith("test the run again (python test.py --run <its run folder>")
