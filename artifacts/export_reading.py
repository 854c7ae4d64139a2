"""Reading an export folder back (artifacts/export.py writes it): its config.json checked for format and
version, every file it records checked against its sha256, its own tokenizer, and how to write it
again when something is damaged (one line naming the file and the export.py command)."""

from __future__ import annotations

import json
from pathlib import Path

from artifacts.checkpoint import CheckpointError
from artifacts.export import CONFIG, CONFIG_RECORD, EXPORT_FORMAT, EXPORT_VERSION, config_digest, is_own_export
from utils.files import file_sha256


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
    check_export_config(path, meta)  # before a model is built from it
    return meta


def check_export_config(path: Path, meta: dict) -> None:
    """config.json is the one the export was written with (`config_sha256`: its content but the records
    of hashes): a hand-edited model, decoding or backend would build and decode another model under
    this export's name. An export written before the record (issue 75) has none and is read by the
    earlier rule, its other files checked: refusing it would strand every such export whose checkpoint
    is gone, and export.py's command writes it again with the record."""
    recorded = meta.get(CONFIG_RECORD)
    if recorded is not None and recorded != config_digest(meta):
        raise CheckpointError(
            f"{path / CONFIG} is not the config.json this export was written with (its {CONFIG_RECORD} "
            f"differs: edited?); restore it, or {reexport_hint(path, meta)}"
        )


def check_export_files(path: Path, meta: dict) -> None:
    """Every file the export's config.json records (`files`: sha256 of the weights, tokenizer,
    CTranslate2 model and vocabularies; exports before that record none), and config.json itself, is
    the one it was written with: a damaged or swapped-in file (another run's tokenizer.json) is one
    line naming it."""
    check_export_config(path, meta)
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
