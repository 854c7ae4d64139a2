"""Loading a trained model (artifacts/loading.py): a checkpoint and its export load as one model; the
decoding commands get the backend `decoding.backend` names; a CTranslate2 export is refused where
weights are needed; a model whose encoding needs a recorded training length it lacks is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from in_process import run_in_process

from artifacts.checkpoint import CheckpointError, find_best_checkpoint
from artifacts.loading import LoadedModel, check_training_lengths, load_for_decoding, load_model
from decoding.backend import HarnessDecoder


@pytest.fixture(scope="module")
def exports(trained_run: Path, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("exports")
    out = {"pytorch": base / "pytorch", "ctranslate2": base / "ct2"}
    for fmt, folder in out.items():
        sets = ["--set", "decoding.length_penalty=avg"] if fmt == "ctranslate2" else []
        proc = run_in_process(["export.py", "--run", str(trained_run), "--format", fmt, *sets, "--output", str(folder)])
        assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_a_checkpoint_and_its_export_load_as_one_model(trained_run: Path, exports: dict[str, Path]) -> None:
    from_checkpoint = load_model(find_best_checkpoint(trained_run))
    from_export = load_model(exports["pytorch"])
    assert isinstance(from_checkpoint, LoadedModel) and from_checkpoint.decoder is None
    assert from_checkpoint.backend == "pytorch" and from_export.path == exports["pytorch"]
    for (name, a), b in zip(from_checkpoint.model.state_dict().items(), from_export.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert not from_export.model.training  # in eval mode


def test_the_decoding_commands_get_the_backend_the_config_names(trained_run: Path, exports: dict[str, Path]) -> None:
    pytorch = load_for_decoding(find_best_checkpoint(trained_run))
    assert isinstance(pytorch.decoder, HarnessDecoder) and pytorch.decoder.model is pytorch.model
    ct2 = load_for_decoding(exports["ctranslate2"])
    assert ct2.backend == "ctranslate2" and ct2.model is None and ct2.decoder.name == "ctranslate2"
    with pytest.raises(CheckpointError, match="is a CTranslate2 export, which holds no PyTorch weights"):
        load_model(exports["ctranslate2"])
    with pytest.raises(Exception, match="compute_type int8 is CTranslate2's"):
        load_for_decoding(find_best_checkpoint(trained_run), ["decoding.compute_type=int8"])


def test_yarn_needs_a_recorded_training_length(trained_run: Path) -> None:
    model = load_model(find_best_checkpoint(trained_run), ["model.positional.scaling=yarn"]).model
    model.encoder_pe.training_length.zero_()  # a model trained before the length was recorded
    with pytest.raises(CheckpointError, match="scaling=yarn is relative to the training length"):
        check_training_lengths(model, "old.pt")
