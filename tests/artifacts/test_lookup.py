"""Which model a command means (artifacts/lookup.py): --model_path, --run and --config found, or one
line naming the flag that fits; a run's best checkpoint read as it is found (the loader takes those
contents: a rotation cannot swap the file in between); the run folder a checkpoint belongs to."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from artifacts.checkpoint import CheckpointError, find_best_checkpoint
from artifacts.lookup import ModelSource, find_model, run_dir_of_checkpoint
from settings.config import ConfigError


def test_a_run_gives_its_best_checkpoint_already_read(trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    source = find_model(run=str(run))
    assert isinstance(source, ModelSource) and source.path == find_best_checkpoint(run)
    assert source.checkpoint is not None and "model" in source.checkpoint
    given = find_model(model_path=str(source.path))
    assert given.path == source.path and given.checkpoint is None  # read when it is loaded


@pytest.mark.parametrize(
    "flags, says",
    [
        ({}, "say which model to use"),
        ({"run": "no/such/run"}, "no such run folder"),
        ({"model_path": "no/such.pt"}, "no such checkpoint file or export folder"),
    ],
)
def test_a_missing_model_is_one_line_naming_the_flag(flags: dict, says: str) -> None:
    with pytest.raises((CheckpointError, ConfigError), match=says):
        find_model(**flags)


def test_the_wrong_flag_for_a_path_names_the_right_one(trained_run: Path) -> None:
    best = find_best_checkpoint(trained_run)
    with pytest.raises(CheckpointError, match=f"a checkpoint file goes in --model_path {best}"):
        find_model(run=str(best))
    with pytest.raises(CheckpointError, match=f"is a run folder: use --run {trained_run}"):
        find_model(model_path=str(trained_run))


def test_the_run_folder_of_a_checkpoint(tmp_path: Path) -> None:
    assert run_dir_of_checkpoint(tmp_path / "runs" / "x" / "checkpoints" / "best.pt") == (tmp_path / "runs" / "x")
    assert run_dir_of_checkpoint(tmp_path / "loose.pt") == tmp_path
    assert run_dir_of_checkpoint(tmp_path) == tmp_path  # an export folder is its own
