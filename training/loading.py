"""Loading a trained model for a command: one loader for checkpoints (.pt) and exported folders
(export.py) alike, the lookup of the model an entry script names (--model_path, --run, --config), and
the test-time config a model is scored under (only keys that cannot change the trained model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from training.checkpoint import CheckpointError, find_best_checkpoint, read_checkpoint, saved_config
from training.export import CONFIG, EXPORT_FORMAT, EXPORT_VERSION, WEIGHTS, is_export
from utils.config import ConfigError, flatten, load_config, to_dict


def load_for_inference(path: str | Path, overrides: Optional[list[str]] = None, device: str = "cpu"):
    """(config, tokenizer, model in eval mode) from one checkpoint file or an exported folder
    (export.py); `overrides` may change only test-time keys (decoding, evaluation, ...: `test_time_config`)."""
    from models import build_model
    from tokenizer import tokenizer_from_state_dict

    if is_export(path):
        return read_export(path, overrides, device)

    ckpt = read_checkpoint(path)
    meta = ckpt["meta"]
    cfg = test_time_config(saved_config(ckpt), overrides, str(path))
    tokenizer = tokenizer_from_state_dict(meta["tokenizer"])
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id)
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise CheckpointError(
            f"{path}: the weights do not fit the model built from its config (was model.* overridden?): {e}"
        ) from None
    check_training_lengths(model, str(path))
    model.to(device).eval()
    return cfg, tokenizer, model


def read_export(path: str | Path, overrides: Optional[list[str]], device: str):
    """(config, tokenizer, model in eval mode) from an exported folder."""
    from safetensors.torch import load_model

    from models import build_model
    from tokenizer import BPETokenizer, PretrainedTokenizer

    path = Path(path)
    meta = json.loads((path / CONFIG).read_text(encoding="utf-8"))
    if meta.get("format") != EXPORT_FORMAT or meta.get("format_version", 0) > EXPORT_VERSION:
        raise CheckpointError(
            f"{path / CONFIG} is not an export of this harness (format {meta.get('format')!r}, "
            f"version {meta.get('format_version')!r}); export.py writes {EXPORT_FORMAT} "
            f"version {EXPORT_VERSION}"
        )
    cfg = test_time_config(meta["config"], overrides, str(path))
    if (path / BPETokenizer.filename).is_file():
        tokenizer = BPETokenizer.load(path)
    else:
        tokenizer = PretrainedTokenizer.from_pretrained(str(path / PretrainedTokenizer.dirname))
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id)
    try:
        load_model(model, str(path / WEIGHTS), strict=True)
    except (RuntimeError, OSError) as e:
        raise CheckpointError(
            f"{path / WEIGHTS}: the weights do not fit the model of {path / CONFIG} "
            f"(was model.* overridden?): {str(e).splitlines()[0][:300]}"
        ) from None
    check_training_lengths(model, str(path))
    model.to(device).eval()
    return cfg, tokenizer, model


def test_time_config(saved: dict, overrides: Optional[list[str]], checkpoint: str):
    """The config a checkpoint trained with `saved` is tested under: `saved` with `overrides` applied,
    which may change only how the trained model is decoded and scored (the keys' roles:
    utils/key_roles.py). Anything else would score another model, or other data, under this
    model's name: CheckpointError naming the key. An override equal to the trained value is fine."""
    from utils.config import parse_override
    from utils.key_roles import changes, may_change, test_time_refusal

    trained = load_config(raw=saved)
    encoding, flat = trained.model.positional.name, flatten(to_dict(trained))
    refused = []
    for text in overrides or []:
        keys, value = parse_override(text)
        key = ".".join(keys)
        try:  # judge the keys it changes (a section, `decoding={beam_size: 3}`, changes several)
            changed = changes(flat, flatten(to_dict(load_config(raw=saved, overrides=[text]))))
        except ConfigError:  # it does not even load with this model (say another encoding's option)
            changed = {} if may_change(key, "test", encoding) else {key: (flat.get(key), value)}
        refused += [(k, was, now) for k, (was, now) in changed.items() if not may_change(k, "test", encoding)]
    if refused:
        raise CheckpointError("--set " + test_time_refusal(refused, encoding, checkpoint))
    return load_config(raw=saved, overrides=overrides)


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


def resolve_checkpoint(
    model_path: Optional[str] = None,
    run: Optional[str] = None,
    config: Optional[str] = None,
    overrides: Sequence[str] = (),
) -> Path:
    """The model a command names: --model_path (a checkpoint or an export folder), or the best
    checkpoint of --run, or of the --config's run folder (for the commands that take --config)."""
    if model_path:
        path = Path(model_path)
        if not path.exists():
            raise CheckpointError(f"--model_path {path}: no such checkpoint file or export folder")
        return path
    if run:
        return find_best_checkpoint(run)
    if config:
        return find_best_checkpoint(load_config(config, list(overrides)).resolved_run_dir)
    raise ConfigError(
        "say which model to use: --model_path <checkpoint.pt>, --run runs/<name>, "
        "or --config <file.yaml> (its run folder's best checkpoint)"
    )


def run_dir_of_checkpoint(path: Path) -> Path:
    """runs/<name>/checkpoints/x.pt -> runs/<name>; a loose checkpoint -> its folder; an export -> itself."""
    path = Path(path).resolve()
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def check_model_matches(config_path: str, overrides: list[str], ckpt_cfg, ckpt_path: Path):
    """A --config given beside a checkpoint must describe the model it holds and the data it was
    trained on; the config's test-time settings (decoding, evaluation, ...) win, its training
    settings and seed do not matter for testing and are left as the checkpoint has them."""
    from utils.config_schema import EXPERIMENT
    from utils.key_roles import changes, may_change, role_of

    given = load_config(config_path, overrides)
    trained, wanted = flatten(to_dict(ckpt_cfg)), flatten(to_dict(given))
    encoding = ckpt_cfg.model.positional.name
    diff = changes(trained, wanted)
    refused = [k for k in diff if role_of(k, encoding) == EXPERIMENT]
    if refused:
        details = "; ".join(f"{k}: checkpoint={diff[k][0]!r} config={diff[k][1]!r}" for k in refused)
        raise CheckpointError(
            f"{ckpt_path} was trained with a different model or data than {config_path}: {details}. "
            f"Drop --config (the checkpoint carries its own) or pick the matching config."
        )
    raw = to_dict(ckpt_cfg)
    for key, (_, value) in diff.items():
        if may_change(key, "test", encoding):
            *sections, last = key.split(".")
            node = raw
            for part in sections:
                node = node[part]
            node[last] = value
    return load_config(raw=raw)
