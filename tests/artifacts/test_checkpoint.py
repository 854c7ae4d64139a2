"""The checkpoint format (artifacts/checkpoint.py): loaded without pickle (tensors and plain data
only), every unreadable file one line naming it, non-finite weights refused, the best and last
checkpoints found by the names training gives them, a resume's newest good one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from artifacts.checkpoint import (
    CheckpointError,
    checkpoint_score,
    checkpoint_step,
    find_best_checkpoint,
    find_last_checkpoint,
    non_finite_weights,
    read_checkpoint,
    read_newest_good_checkpoint,
)


def save(path: Path, **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": {"w": torch.ones(2)}, "meta": {"format_version": 1}, **extra}, path)
    return path


class Foreign:
    pass


@pytest.mark.parametrize(
    "write, says",
    [
        (lambda p: p.write_bytes(b""), "is empty (0 bytes"),
        (lambda p: p.write_text("hello"), "is not a checkpoint (not a PyTorch file)"),
        (lambda p: torch.save({"model": Foreign(), "meta": {}}, p), "holds Python objects"),
        (lambda p: torch.save({"weights": torch.ones(1)}, p), "no 'model'/'meta' entries"),
        (lambda p: torch.save({"model": {}, "meta": {"format_version": 99}}, p), "newer than this harness reads"),
        (lambda p: p.write_bytes(save(p).read_bytes()[:300]), "unreadable (truncated or corrupted?)"),  # cut short
    ],
)
def test_what_is_not_a_checkpoint_of_ours_is_one_line_naming_it(tmp_path: Path, write, says: str) -> None:
    path = tmp_path / "x.pt"
    write(path)
    with pytest.raises(CheckpointError) as error:
        read_checkpoint(path)
    assert says in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        read_checkpoint(tmp_path / "gone.pt")


def test_names_give_steps_and_scores_and_the_best_and_last_are_found(tmp_path: Path) -> None:
    ckpts = tmp_path / "run" / "checkpoints"
    for name in ("best_checkpoint_300_valid_loss=-2.5.pt", "best_checkpoint_600_valid_loss=-2.1.pt"):
        save(ckpts / name)
    for name in ("last_checkpoint_600.pt", "last_checkpoint_900.pt"):
        save(ckpts / name)
    assert checkpoint_step(Path("best_checkpoint_600_valid_loss=-2.1.pt")) == 600
    assert checkpoint_score(Path("best_checkpoint_600_valid_loss=-2.1.pt")) == -2.1
    assert find_best_checkpoint(tmp_path / "run").name == "best_checkpoint_600_valid_loss=-2.1.pt"
    assert find_last_checkpoint(tmp_path / "run").name == "last_checkpoint_900.pt"
    with pytest.raises(CheckpointError, match="has no checkpoint yet"):
        find_best_checkpoint(tmp_path / "empty")


def test_non_finite_weights_are_named_with_the_fix() -> None:
    assert non_finite_weights("x.pt", {"w": torch.ones(2), "step": torch.tensor(3)}, "fix it") is None
    problem = non_finite_weights("x.pt", {"a": torch.ones(2), "b": torch.tensor([1.0, float("nan")])}, "fix it")
    assert problem == "x.pt has non-finite weights (1 tensors, e.g. b): training diverged before it was saved; fix it"


def test_a_resume_takes_the_newest_good_checkpoint(tmp_path: Path) -> None:
    ckpts = tmp_path / "run" / "checkpoints"
    state = {"trainer": {}, "optimizer": {}}
    save(ckpts / "last_checkpoint_300.pt", **state)
    (ckpts / "last_checkpoint_900.pt").write_bytes(b"")  # cut short
    torch.save({"model": {"w": torch.tensor([float("inf")])}, "meta": {}, **state}, ckpts / "last_checkpoint_600.pt")
    save(ckpts / "last_checkpoint_700.pt")  # weights only (an averaged checkpoint renamed)
    said = []
    path, _ = read_newest_good_checkpoint(tmp_path / "run", log=said.append)
    assert path.name == "last_checkpoint_300.pt" and len(said) == 3
    assert "is empty" in said[0] and "no training state" in said[1] and "non-finite" in said[2]
