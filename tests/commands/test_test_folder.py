"""Where test.py writes (commands/test_folder.py): the split's own folder of the checkpoint's run, a
variant folder for another backend or a source file, a folder of its own for a checkpoint other than
the run's best; never another run's folder; the same request again is recognised as done."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from artifacts.checkpoint import find_best_checkpoint
from commands.test_folder import backend_variant, output_folder, same_test_done
from commands.test_request import TestRequest as Request
from utils.errors import HarnessError


def test_a_backend_gets_a_variant_folder_named_by_its_settings() -> None:
    assert backend_variant([]) is None
    assert backend_variant(["decoding.beam_size=2"]) is None
    assert backend_variant(["decoding.backend=ctranslate2"]) == "ctranslate2"
    assert backend_variant(["decoding.backend=ctranslate2", "decoding.compute_type=int8"]) == "ctranslate2_int8"


def test_the_output_folder_follows_what_is_scored(trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    best = find_best_checkpoint(run)
    assert output_folder(Request(run=str(run), split="test"), best) == (run / "test", run.resolve())
    assert output_folder(Request(run=str(run), split="valid"), best)[0] == run / "valid"
    ct2 = Request(run=str(run), split="test", overrides=["decoding.backend=ctranslate2"])
    assert output_folder(ct2, best)[0] == run / "test_ctranslate2"
    src = Request(run=str(run), split="test", src="/data/news.fr", ref="/data/news.en")
    assert output_folder(src, best)[0] == run / "test_news.fr"
    last = next(p for p in (run / "checkpoints").glob("*.pt") if p.resolve() != best.resolve())
    assert output_folder(Request(model_path=str(last), split="test"), last)[0] == run / f"test_{last.stem}"
    assert output_folder(Request(run=str(run), split="test", output=str(tmp_path / "x")), best) == (
        tmp_path / "x",
        None,
    )


def test_never_into_another_runs_folder(trained_run: Path, tmp_path: Path) -> None:
    run, other = tmp_path / "run", tmp_path / "other"
    shutil.copytree(trained_run, run)
    shutil.copytree(trained_run, other)
    best = find_best_checkpoint(run)
    with pytest.raises(HarnessError, match="inside the run folder"):
        output_folder(Request(run=str(run), split="test", output=str(other / "test")), best)


def test_the_same_request_again_is_recognised_as_done(tmp_path: Path) -> None:
    class Evaluation:
        concat, teacher_forced = [1, 2], False

    class Config:
        evaluation = Evaluation()

    scores = {
        "checkpoint": "runs/x/checkpoints/best.pt",
        "test_set": {"split": "test"},
        "test_time_overrides": {},
        "concat": [{"k": 1}, {"k": 2}],
    }
    (tmp_path / "scores.json").write_text(json.dumps(scores))
    request = Request(run="runs/x", split="test")
    ckpt = Path("runs/x/checkpoints/best.pt")
    assert same_test_done(request, Config(), ckpt, {"split": "test"}, tmp_path) == scores
    assert same_test_done(request, Config(), ckpt, {"split": "valid"}, tmp_path) is None
    other = Request(run="runs/x", split="test", overrides=["decoding.beam_size=2"])
    assert same_test_done(other, Config(), ckpt, {"split": "test"}, tmp_path) is None
    assert same_test_done(request, Config(), ckpt, {"split": "test"}, tmp_path / "nothing") is None
