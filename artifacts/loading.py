"""Loading a trained model for a command: one loader for checkpoints (.pt) and exported folders
(export.py) alike, returning a `LoadedModel` (artifacts/lookup.py finds which model a command means,
artifacts/test_time.py the config it is tested under)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from artifacts.checkpoint import CheckpointError, check_finite_weights, read_checkpoint, saved_config
from artifacts.export import CONFIG, WEIGHTS, is_export
from artifacts.export_reading import check_export_files, export_tokenizer, read_export_config, reexport_hint
from artifacts.lookup import ModelSource, run_dir_of_checkpoint
from artifacts.test_time import check_model_matches, test_time_config
from artifacts.tested_run import untrained_changes
from decoding.backend import DecodingBackend, HarnessDecoder
from decoding.ctranslate2_backend import CTranslate2Model
from settings.config import ConfigError, ExperimentConfig, Override, load_config, parse_override
from settings.yaml_files import read_yaml
from utils import run_files
from utils.publish import settle
from utils.run_folder import is_run_folder

PYTORCH = "pytorch"  # decoding.backend's default: the harness's own search
LOADING_FIX = "use an earlier checkpoint (--model_path <run>/checkpoints/...) or train again with a lower training.lr"


@dataclass
class LoadedModel:
    """A trained model as a command uses it: the config it is tested under, its tokenizer, the model
    (a `Seq2SeqTransformer` in eval mode; None for a CTranslate2 export, which holds no PyTorch
    weights), the checkpoint file or export folder it came from, and the `DecodingBackend` that
    decodes it (set by `load_for_decoding`, and for a CTranslate2 export)."""

    config: ExperimentConfig
    tokenizer: Any
    model: Any
    path: Path
    decoder: Optional[DecodingBackend] = None

    @property
    def backend(self) -> str:
        return self.decoder.name if self.decoder is not None else PYTORCH


def as_source(source: ModelSource | str | Path) -> ModelSource:
    return source if isinstance(source, ModelSource) else ModelSource(Path(source))


def load_for_decoding(
    source: ModelSource | str | Path, overrides: Sequence[str | Override] = (), config: Optional[str] = None
) -> LoadedModel:
    """The model test.py and inference.py decode with, its `decoder` the backend `decoding.backend`
    names, on the CPU (the caller moves it). A --config beside the model may set its test-time keys
    (`check_model_matches`); backend ctranslate2 converts a checkpoint on first use
    (artifacts/ctranslate2_conversion.py)."""
    from artifacts.ctranslate2_conversion import converted

    source, overrides = as_source(source), [parse_override(o) for o in overrides]  # parsed once
    loaded = load_model(source, overrides, device="cpu", ctranslate2=True)
    if config:
        given = source.given_config or load_config(config, overrides)  # read once: by the lookup, or here
        loaded.config = check_model_matches(given, config, loaded.config, loaded.path)
    cfg = loaded.config
    if cfg.decoding.backend == PYTORCH and cfg.decoding.compute_type is not None:
        raise ConfigError(
            f"decoding.compute_type {cfg.decoding.compute_type} is CTranslate2's: add --set "
            f"decoding.backend=ctranslate2 (inference.py: --backend ctranslate2), or drop it"
        )
    if loaded.decoder is None:
        convert = cfg.decoding.backend == CTranslate2Model.name
        loaded.decoder = (
            converted(cfg, loaded.tokenizer, loaded.model, loaded.path) if convert else HarnessDecoder(loaded.model)
        )
    return loaded


def load_model(
    source: ModelSource | str | Path,
    overrides: Sequence[str | Override] = (),
    device: str = "cpu",
    ctranslate2: bool = False,
) -> LoadedModel:
    """A model in eval mode from one checkpoint file or an exported folder (export.py); `overrides`
    may change only test-time keys (decoding, evaluation, ...: `test_time_config`). A CTranslate2
    export loads as a `CTranslate2Model` where the caller decodes with it (`ctranslate2`), and is
    refused with one line elsewhere (plots and exports need the weights)."""
    from models.build import build_model
    from tokenizer import tokenizer_from_state_dict

    source = as_source(source)
    path, overrides = source.path, [parse_override(o) for o in overrides]
    # an export.py stopped while publishing this export: finished (the new export whole), or refused
    settle(path, Path(sys.argv[0]).name or "this command", "export.py")
    if is_export(path):
        return read_export(path, overrides, device, ctranslate2)
    ckpt = source.checkpoint or read_checkpoint(path)
    meta = ckpt["meta"]
    check_checkpoint_of_run(path, saved_config(ckpt))
    cfg = test_time_config(saved_config(ckpt), overrides, str(path))
    tokenizer = tokenizer_from_state_dict(meta["tokenizer"])
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id)
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise CheckpointError(
            f"{path}: the weights do not fit the model built from its config (was model.* overridden?): {e}"
        ) from None
    return checked(cfg, tokenizer, model, path, meta, device)


def read_export(path: Path, overrides: list[Override], device: str, ctranslate2: bool = False) -> LoadedModel:
    """A model from an exported folder."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model as load_weights

    from artifacts.ctranslate2_conversion import read_ctranslate2_export
    from models.build import build_model

    meta = read_export_config(path)
    if meta.get("backend") == CTranslate2Model.name:
        cfg, tokenizer, decoder = read_ctranslate2_export(path, meta, overrides, device, ctranslate2)
        return LoadedModel(cfg, tokenizer, None, path, decoder)
    cfg = test_time_config(meta["config"], overrides, str(path))
    tokenizer = export_tokenizer(path, meta)
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id)
    try:
        load_weights(model, str(path / WEIGHTS), strict=True)
    except SafetensorError as e:  # a cut copy: not the file's fault that it does not "fit"
        raise CheckpointError(
            f"{path / WEIGHTS} is unreadable (truncated or damaged?: {str(e).splitlines()[0][:200]}); "
            f"{reexport_hint(path, meta)}"
        ) from None
    except (RuntimeError, OSError) as e:
        raise CheckpointError(
            f"{path / WEIGHTS}: the weights do not fit the model of {path / CONFIG} "
            f"(was model.* overridden?): {str(e).splitlines()[0][:300]}"
        ) from None
    return checked(cfg, tokenizer, model, path, meta, device)


def checked(cfg, tokenizer, model, path: Path, meta: dict, device: str) -> LoadedModel:
    """The loaded model once its weights are checked (a training length it needs, finite weights,
    the files an export records: after the readers' own messages for a cut or missing file), in
    eval mode on `device`."""
    check_training_lengths(model, str(path))
    check_finite_weights(path, model.state_dict(), LOADING_FIX)
    check_export_files(path, meta)
    return LoadedModel(cfg, tokenizer, model.to(device).eval(), path)


def check_training_lengths(model, source: str) -> None:
    """An encoding option relative to the training length (RoPE's yarn scaling) needs a model that
    recorded it (trained from 2026-11-26 on): otherwise one line saying what else works."""
    for stack, pe in (("encoder", model.encoder_pe), ("decoder", model.decoder_pe)):
        if getattr(pe, "needs_training_length", False) and int(pe.training_length) < 1:
            raise CheckpointError(
                f"{source}: model.positional.scaling=yarn is relative to the training length, "
                f"which this model's {stack} does not record (trained before it was recorded); "
                f"use scaling linear or ntk with scaling_factor, or retrain"
            )


def check_checkpoint_of_run(path: str | Path, saved: dict) -> None:
    """The checkpoint's own config is the model: one loaded through a run folder (its checkpoints/,
    where test.py writes into the run and compare.py groups by config.yaml) must have been trained
    with the run's experiment and seed (the keys a resume may not change). CheckpointError naming
    the keys and both files otherwise, so that its scores never pass for that run's."""
    path = Path(path)
    run_dir = run_dir_of_checkpoint(path)
    if path.is_dir() or not is_run_folder(run_dir):  # a loose checkpoint beside a user's own config.yaml
        return
    run_config = run_dir / run_files.CONFIG
    refused = untrained_changes(saved, read_yaml(run_config))
    if refused:
        details = "; ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in refused[:6])
        raise CheckpointError(
            f"{path} is not a checkpoint of the run {run_config.parent}: it was trained with other "
            f"experiment settings than {run_config} has (checkpoint -> config.yaml: {details}"
            f"{' ...' if len(refused) > 6 else ''}); move it out of the run folder and give it "
            f"with --model_path, or restore the run's config.yaml"
        )
