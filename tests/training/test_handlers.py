"""The training handlers (training/handlers.py): a run stops rather than keep a non-finite step,
validation BLEU's search comes from the training keys, the budget ends training, a checkpoint that
rotates out is deleted only after the new one is written, and non-zero ranks stay quiet."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import ROOT, tiny_model

from settings.config import load_config
from training.handlers import Rank0Only, RotatingDiskSaver, budget_reached, refuse_non_finite, validation_search
from utils.errors import WriteError


def test_a_non_finite_score_or_weight_stops_the_run_naming_it() -> None:
    model = tiny_model()
    refuse_non_finite(model, {"valid_loss": 2.5}, step=10)  # finite: nothing happens
    with pytest.raises(FloatingPointError, match=r"step 10: valid_loss=nan; no checkpoint"):
        refuse_non_finite(model, {"valid_loss": math.nan}, step=10)
    name, weight = next(iter(model.named_parameters()))
    with torch.no_grad():
        weight[0, 0] = math.inf
    with pytest.raises(FloatingPointError, match=rf"non-finite weights in 1 tensors \(e.g. {name}\)"):
        refuse_non_finite(model, {}, step=11)


def test_validation_search_is_greedy_from_the_training_keys_alone() -> None:
    cfg = load_config(
        ROOT / "configs" / "demo" / "rope.yaml",
        ["training.bleu_max_len_a=0.5", "training.bleu_max_len_b=3", "decoding.beam_size=7", "decoding.max_tokens=99"],
    )
    search = validation_search(cfg)
    assert (search.strategy, search.max_len_a, search.max_len_b) == ("greedy", 0.5, 3)
    assert search.precision == cfg.training.bleu_precision and search.max_tokens == 99  # the batch budget only
    assert search.beam_size != 7


@pytest.mark.parametrize(
    "max_steps, epochs, step, epoch, done",
    [(None, 3, 100, 2, False), (None, 3, 100, 3, True), (50, 3, 49, 9, False), (50, 3, 50, 0, True)],
)
def test_the_budget_is_max_steps_when_set_else_epochs(max_steps, epochs, step, epoch, done) -> None:
    assert budget_reached(SimpleNamespace(max_steps=max_steps, epochs=epochs), step, epoch) is done


def test_a_rotated_checkpoint_is_deleted_only_after_the_new_one_is_written(tmp_path: Path) -> None:
    saver = RotatingDiskSaver(tmp_path, require_empty=False, atomic=True)
    saver({"w": torch.ones(1)}, "last_1.pt")
    saver.remove("last_1.pt")  # Ignite asks to delete first ...
    assert (tmp_path / "last_1.pt").exists()  # ... but the old one stays until the new one is whole
    saver({"w": torch.ones(1)}, "last_2.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last_2.pt"]


def test_a_failed_checkpoint_write_is_one_line_and_keeps_the_earlier_ones(tmp_path: Path, monkeypatch) -> None:
    saver = RotatingDiskSaver(tmp_path, require_empty=False, atomic=True)
    saver({"w": torch.ones(1)}, "last_1.pt")
    saver.remove("last_1.pt")

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(WriteError, match=r"cannot write the checkpoint .*last_2.pt: No space left on device"):
        saver({"w": torch.ones(1)}, "last_2.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last_1.pt"]


def test_only_rank_zero_logs() -> None:
    said = []
    target = SimpleNamespace(say=said.append)
    Rank0Only(target, active=True).say("rank 0")
    Rank0Only(target, active=False).say("rank 1")
    assert said == ["rank 0"]
