"""Loading a trained model for a command: one loader for checkpoints (.pt) and exported folders
(export.py) alike, the lookup of the model an entry script names (--model_path, --run, --config), and
the test-time config a model is scored under (only keys that cannot change the trained model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from training.checkpoint import (
    CheckpointError,
    check_finite_weights,
    checkpoint_step,
    find_best_checkpoint,
    read_checkpoint,
    saved_config,
)
from training.export import CONFIG, CTRANSLATE2, EXPORT_FORMAT, EXPORT_VERSION, WEIGHTS, is_export, is_own_export
from utils.config import ConfigError, flatten, load_config, to_dict
from utils.run_folder import RunLock, is_run_folder

ROTATION_TRIES = 5  # a training run may rotate its best/last checkpoint between listing and reading
# The checkpoint `resolve_checkpoint` read from a run ({resolved path: contents}), handed to
# `load_for_inference` once: the file may have been rotated away since it was read.
_READ_FROM_RUN: dict[str, dict] = {}


def load_for_decoding(path: str | Path, overrides: Sequence[str] = (), config: Optional[str] = None):
    """(config, tokenizer, model) for test.py and inference.py: the model `decoding.backend` decodes
    with, on the CPU (the caller moves it). A --config beside the model may set its test-time keys
    (`check_model_matches`); backend ctranslate2 converts a checkpoint on first use
    (training/ctranslate2_loading.py)."""
    cfg, tokenizer, model = load_for_inference(path, list(overrides), device="cpu", ctranslate2=True)
    if config:
        cfg = check_model_matches(config, list(overrides), cfg, Path(path))
    if cfg.decoding.backend == "pytorch" and cfg.decoding.compute_type is not None:
        raise ConfigError(
            f"decoding.compute_type {cfg.decoding.compute_type} is CTranslate2's: add --set "
            f"decoding.backend=ctranslate2 (inference.py: --backend ctranslate2), or drop it"
        )
    from decoding.ctranslate2_backend import is_ctranslate2

    if cfg.decoding.backend == "ctranslate2" and not is_ctranslate2(model):
        from training.ctranslate2_loading import converted

        model = converted(cfg, tokenizer, model, Path(path))
    return cfg, tokenizer, model


def load_for_inference(
    path: str | Path, overrides: Optional[list[str]] = None, device: str = "cpu", ctranslate2: bool = False
):
    """(config, tokenizer, model in eval mode) from one checkpoint file or an exported folder
    (export.py); `overrides` may change only test-time keys (decoding, evaluation, ...: `test_time_config`).
    A CTranslate2 export loads as a `CTranslate2Model` where the caller decodes with it
    (`ctranslate2`), and is refused with one line elsewhere (plots and exports need the weights)."""
    from models import build_model
    from tokenizer import tokenizer_from_state_dict

    if is_export(path):
        return read_export(path, overrides, device, ctranslate2)

    ckpt = _READ_FROM_RUN.pop(str(Path(path).resolve()), None) or read_checkpoint(path)
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
    check_training_lengths(model, str(path))
    check_finite_weights(path, model.state_dict(), LOADING_FIX)
    check_export_files(path, meta)  # (after the readers' own messages for a cut or missing file)
    model.to(device).eval()
    return cfg, tokenizer, model


LOADING_FIX = "use an earlier checkpoint (--model_path <run>/checkpoints/...) or train again with a lower training.lr"


def read_export(path: str | Path, overrides: Optional[list[str]], device: str, ctranslate2: bool = False):
    """(config, tokenizer, model in eval mode) from an exported folder."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    from models import build_model

    path = Path(path)
    meta = read_export_config(path)
    if meta.get("backend") == "ctranslate2":
        from training.ctranslate2_loading import read_ctranslate2_export

        return read_ctranslate2_export(path, meta, overrides, device, ctranslate2)
    cfg = test_time_config(meta["config"], overrides, str(path))
    tokenizer = export_tokenizer(path, meta)
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id)
    try:
        load_model(model, str(path / WEIGHTS), strict=True)
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
    check_training_lengths(model, str(path))
    check_finite_weights(path, model.state_dict(), LOADING_FIX)
    check_export_files(path, meta)  # (after the readers' own messages for a cut or missing file)
    model.to(device).eval()
    return cfg, tokenizer, model


def read_export_config(path: Path) -> dict:
    """An export's config.json, checked: one line naming the file when it is cut, foreign or newer."""
    try:
        meta = json.loads((path / CONFIG).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(
            f"{path / CONFIG} is not readable JSON (truncated or damaged?: {e}); {reexport_hint(path, {})}"
        ) from None
    version = meta.get("format_version", 0) if isinstance(meta, dict) else None
    if (
        isinstance(meta, dict)
        and meta.get("format") == EXPORT_FORMAT
        and isinstance(version, int)
        and version > EXPORT_VERSION
    ):
        raise CheckpointError(
            f"{path / CONFIG} is an export of format version {version}, newer than this harness reads "
            f"({EXPORT_VERSION}); update the harness (git pull) to load it"
        )
    if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT or not isinstance(version, int):
        meta = meta if isinstance(meta, dict) else {}
        raise CheckpointError(
            f"{path / CONFIG} is not an export of this harness (format {meta.get('format')!r}, "
            f"version {meta.get('format_version')!r}); export.py writes {EXPORT_FORMAT} "
            f"version {EXPORT_VERSION}"
        )
    if not isinstance(meta.get("config"), dict):
        raise CheckpointError(f"{path / CONFIG} holds no 'config' section; {reexport_hint(path, meta)}")
    return meta


def check_export_files(path: Path, meta: dict) -> None:
    """Every file the export's config.json records (`files`: sha256 of the weights, tokenizer,
    CTranslate2 model and vocabularies; exports before that record none) is the one it was written
    with: a damaged or swapped-in file (another run's tokenizer.json) is one line naming it."""
    from utils.files import file_sha256

    for name, digest in (meta.get("files") or {}).items():
        file = path / name
        if not file.is_file() or file_sha256(file) != digest:
            what = "is missing" if not file.is_file() else "is not the file this export was written with"
            raise CheckpointError(
                f"{file} {what} (config.json records its sha256: damaged or replaced?); {reexport_hint(path, meta)}"
            )


def export_tokenizer(path: Path, meta: dict):
    """The export's own tokenizer (tokenizer.json, or a pretrained one's tokenizer/ folder), read
    from the folder alone: a missing file is named, never looked up on the Hugging Face hub."""
    from tokenizer import BPETokenizer, PretrainedTokenizer

    if (path / BPETokenizer.filename).is_file():
        return BPETokenizer.load(path)
    if (path / PretrainedTokenizer.dirname).is_dir():
        return PretrainedTokenizer.from_folder(path / PretrainedTokenizer.dirname)
    pretrained = (meta["config"].get("tokenizer") or {}).get("type") == "pretrained"
    missing = path / (PretrainedTokenizer.dirname if pretrained else BPETokenizer.filename)
    raise CheckpointError(f"{missing} is missing: {reexport_hint(path, meta)}")


def reexport_hint(path: Path, meta: dict) -> str:
    """How to write the export at `path` again: from the checkpoint its config.json names
    (`exported_from`, relative to the folder that holds its run), into `path` with --overwrite when
    export.py may replace what is there, else once the damaged folder is moved away."""
    source = meta.get("exported_from")
    if source and "/" in str(source):  # <run name>/checkpoints/<file>
        model = f"--model_path <the folder holding that run>/{source}"
        where = f" from {source} (exported_from, relative to the folder that holds its run, e.g. runs/)"
    elif source:  # a checkpoint outside any run: only its file name was kept
        model = f"--model_path <its folder>/{source}"
        where = f" from {source} (exported_from: the checkpoint's file name)"
    else:
        model, where = "--model_path <the checkpoint it came from>", ""
    if is_own_export(path):
        return f"re-export it{where}: python export.py {model} --output {path} --overwrite"
    return (
        f"re-export it{where}: move {path} away first (export.py replaces only a whole export), "
        f"then python export.py {model} --output {path}"
    )


def export_facts(path: Path) -> dict:
    """An export's config.json as far as it reads (a damaged one: {}), for `reexport_hint`."""
    try:
        meta = json.loads((path / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


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
        return checked_model_path(Path(model_path))
    if run:
        return read_from_run(checked_run(Path(run)))
    if config:
        return read_from_run(load_config(config, list(overrides)).resolved_run_dir)
    raise ConfigError(
        "say which model to use: --model_path <checkpoint.pt>, --run runs/<name>, "
        "or --config <file.yaml> (its run folder's best checkpoint)"
    )


def checked_run(run: Path) -> Path:
    """--run as given, if it is a folder; else which flag fits (an export, a checkpoint) or what a run is."""
    if is_export(run):
        raise CheckpointError(f"--run {run} is an export folder (export.py): use --model_path {run}")
    if run.is_file():
        fix = (
            f"a checkpoint file goes in --model_path {run}"
            if run.suffix == ".pt"
            else "give the run folder (runs/<name>)"
        )
        raise CheckpointError(f"--run {run} is a file, not a run folder: {fix}")
    if not run.is_dir():
        raise CheckpointError(f"--run {run}: no such run folder (a run is runs/<name>, written by train.py)")
    return run


def checked_model_path(path: Path) -> Path:
    """--model_path as given, if it names a checkpoint file or an export folder; else which flag fits."""
    if not path.exists():
        raise CheckpointError(f"--model_path {path}: no such checkpoint file or export folder")
    if path.is_dir() and not is_export(path):
        if is_run_folder(path):
            raise CheckpointError(
                f"--model_path {path} is a run folder: use --run {path} (its best checkpoint), "
                f"or --model_path {path / 'checkpoints'}/<file>.pt"
            )
        weights = f"{CTRANSLATE2}/model.bin" if export_facts(path).get("backend") == "ctranslate2" else WEIGHTS
        missing = [name for name in (weights, CONFIG) if not (path / name).is_file()]
        if len(missing) == 1:
            raise CheckpointError(f"{path / missing[0]} is missing: {reexport_hint(path, export_facts(path))}")
        raise CheckpointError(
            f"--model_path {path} is a folder but not an export (export.py writes {WEIGHTS} and "
            f"{CONFIG}); give a checkpoint .pt, an export folder, or --run for a run folder"
        )
    return path


def read_from_run(run_dir: Path) -> Path:
    """The run's best checkpoint, read now (`load_for_inference` takes it from here). A run that is
    training rotates its checkpoints: one that vanished between listing and reading is listed again,
    never blamed."""
    for _ in range(ROTATION_TRIES):
        path = None
        try:
            path = find_best_checkpoint(run_dir)
            ckpt = read_checkpoint(path)
        except FileNotFoundError:  # (only the listing raises it) a listed file vanished: list again
            continue
        except CheckpointError:
            if path is None or path.exists():  # no checkpoint at all, or a damaged one: say so
                raise
            continue  # rotated away: list again
        _READ_FROM_RUN.clear()
        _READ_FROM_RUN[str(path.resolve())] = ckpt
        holder = training_holder(run_dir)
        if holder:
            print(
                f"note: run {run_dir} is still training ({holder}): using its checkpoint of step "
                f"{checkpoint_step(path)} ({path.name}); a later one may follow",
                file=sys.stderr,
            )
        return path
    raise CheckpointError(
        f"the checkpoints of {run_dir} were replaced {ROTATION_TRIES} times while being read (the "
        f"run is training and rotating them); run the command again"
    )


def training_holder(run_dir: Path) -> Optional[str]:
    """Who holds the run folder's lock ('PID n: train.py ...'), if train.py does; None otherwise."""
    who = RunLock.holder(run_dir)
    return who if who and "train.py" in who else None


def check_checkpoint_of_run(path: str | Path, saved: dict) -> None:
    """The checkpoint's own config is the model: one loaded through a run folder (its checkpoints/,
    where test.py writes into the run and compare.py groups by config.yaml) must have been trained
    with the run's experiment and seed (the keys a resume may not change). CheckpointError naming
    the keys and both files otherwise, so that its scores never pass for that run's."""
    from utils.key_roles import refused_on_resume

    path = Path(path)
    run_dir = run_dir_of_checkpoint(path)
    if path.is_dir() or not is_run_folder(run_dir):  # a loose checkpoint beside a user's own config.yaml
        return
    run_config = run_dir / "config.yaml"
    trained = load_config(raw=saved)
    encoding = trained.model.positional.name
    diff, refused, _ = refused_on_resume(flatten(to_dict(trained)), flatten(to_dict(load_config(run_config))), encoding)
    if refused:
        details = "; ".join(f"{k}: {diff[k][0]!r} -> {diff[k][1]!r}" for k in refused[:6])
        raise CheckpointError(
            f"{path} is not a checkpoint of the run {run_config.parent}: it was trained with other "
            f"experiment settings than {run_config} has (checkpoint -> config.yaml: {details}"
            f"{' ...' if len(refused) > 6 else ''}); move it out of the run folder and give it "
            f"with --model_path, or restore the run's config.yaml"
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
