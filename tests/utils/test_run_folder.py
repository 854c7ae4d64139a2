"""What a run folder is (utils/run_folder.py): recognised by its config.yaml and checkpoints/ or
metrics log, found above any path inside it; a user's files inside the harness's own folders listed
(so that nothing of theirs is deleted with a run); one lock per run, naming its holder."""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.errors import HarnessError
from utils.run_folder import RunLock, is_run_folder, matches, run_folder_above, users_files_inside


def make_run(path: Path) -> Path:
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.yaml").write_text("name: x\n")
    return path


def test_a_run_folder_is_recognised_and_found_above_its_files(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs" / "rope")
    assert is_run_folder(run) and not is_run_folder(tmp_path / "runs")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.yaml").write_text("name: x\n")  # a user's config alone is not a run
    assert not is_run_folder(tmp_path / "mine")
    assert run_folder_above(run / "test" / "concat" / "k2" / "x.txt") == run.resolve()
    assert run_folder_above(tmp_path / "mine" / "x") is None


def test_a_users_files_inside_the_harness_folders_are_listed(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    (run / "checkpoints" / "best_checkpoint_3_valid_loss=-1.0.pt").write_bytes(b"x")
    (run / "checkpoints" / "my_average.pt").write_bytes(b"x")  # not a name the harness writes
    (run / "test").mkdir()
    (run / "test" / "scores.json").write_text("{}")
    (run / "test" / "notes.md").write_text("mine")
    (run / "my_notes.md").write_text("beside the run's folders: not inside them")
    assert users_files_inside(run) == ("checkpoints/my_average.pt", "test/notes.md")


def test_patterns_match_whole_paths_part_by_part() -> None:
    assert matches(Path("checkpoints/averaged_last2.pt"), ("checkpoints/averaged_*.pt",))
    assert not matches(Path("checkpoints/sub/averaged_last2.pt"), ("checkpoints/averaged_*.pt",))
    assert not matches(Path("test"), ("test/*",))


def test_one_lock_per_run_naming_its_holder(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with RunLock(run, "train.py --config x.yaml"):
        assert RunLock.held_here(run)
        assert "train.py --config x.yaml" in (RunLock.recorded_holder(run) or "")
        with pytest.raises(HarnessError, match=r"is in use by another process \(PID \d+: train.py"):
            RunLock(run, "test.py").acquire()
    assert not RunLock.held_here(run)
    with RunLock(run, "test.py"):  # released: the next command takes it
        pass
