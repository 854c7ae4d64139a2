"""A model for decoding.backend ctranslate2: a CTranslate2 export read back, or a checkpoint converted
on first use (artifacts/loading.py's `load_model` and `load_for_decoding` call these).

A run's conversion is kept in <run>/ctranslate2/ (a harness folder, artifacts/export.py's layout),
written under the run's lock and stamped with what it was made from: the checkpoint's name and
SHA-256, the model config (RoPE's baked-in scaling included), this converter's version and
CTranslate2's. Any difference converts again. While another process holds the run (training, a
test), or for a checkpoint outside a run, the conversion goes to a temporary folder of this process.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from artifacts.checkpoint import CheckpointError
from artifacts.export import CTRANSLATE2, WEIGHTS, harness_commit, is_export, is_own_export, write_export
from artifacts.export_reading import check_export_files, export_facts, export_tokenizer
from artifacts.lookup import run_dir_of_checkpoint
from artifacts.test_time import test_time_config
from settings.config import Override, to_dict
from utils.errors import HarnessError
from utils.files import file_sha256
from utils.run_folder import RunLock, is_run_folder
from utils.run_log import log


def read_ctranslate2_export(path: Path, meta: dict, overrides: list[Override], device: str, allowed: bool):
    """(config, tokenizer, `CTranslate2Model`) of a CTranslate2 export: decoding keys may change, the
    positional ones (baked into model.bin at export) and the backend may not. `allowed`: the caller
    decodes (test.py, inference.py); plots and exports need weights a CTranslate2 export lacks."""
    from decoding.ctranslate2_backend import CTranslate2Model

    if not allowed:
        raise CheckpointError(
            f"{path} is a CTranslate2 export, which holds no PyTorch weights: give the checkpoint it "
            f"came from ({meta.get('exported_from') or 'see its config.json'}) or a PyTorch export"
        )
    for override in overrides:
        key, text = override.key, override.text
        if key.startswith("model.positional") or key in ("model", "model.positional"):
            raise CheckpointError(
                f"--set {text}: {path} is a CTranslate2 export, with its positional settings baked in "
                f"at export; export it again with export.py --format ctranslate2 --set {text}"
            )
    cfg = test_time_config(meta["config"], overrides, str(path))
    if cfg.decoding.backend != "ctranslate2":
        raise CheckpointError(
            f"{path} is a CTranslate2 export: it decodes only with decoding.backend ctranslate2 "
            f"(for the PyTorch decoder give the checkpoint it came from or a PyTorch export)"
        )
    tokenizer = export_tokenizer(path, meta)
    check_export_files(path, meta)  # a cut model.bin or vocabulary is named before CTranslate2 reads it
    return cfg, tokenizer, CTranslate2Model(path / CTRANSLATE2, meta.get("ctranslate2") or {}).to(device)


def converted(cfg, tokenizer, model, ckpt: Path):
    """The CTranslate2 conversion of `model` (checkpoint or PyTorch export `ckpt`, positional
    settings as in `cfg`) as a `CTranslate2Model`, read into memory at once (a later conversion
    replacing the folder cannot change what this process decodes with)."""
    from decoding.ctranslate2_backend import CTranslate2Model
    from decoding.ctranslate2_spec import check_convertible, converter_stamp

    check_convertible(cfg)
    ckpt = Path(ckpt).resolve()
    run_dir = run_dir_of_checkpoint(ckpt)
    source = {
        "checkpoint": ckpt.name,
        "sha256": file_sha256(ckpt if ckpt.is_file() else ckpt / WEIGHTS),
        "model": to_dict(cfg)["model"],
        **converter_stamp(),
    }
    in_run = ckpt.is_file() and ckpt.parent.name == "checkpoints" and is_run_folder(run_dir)
    ours = in_run and RunLock.held_here(run_dir)  # (test.py holds its run's lock from the start)
    lock = RunLock(run_dir, "converting a checkpoint for CTranslate2") if in_run and not ours else None
    try:
        if lock is not None:
            lock.acquire()
    except HarnessError as busy:  # training or testing into the run: convert beside it instead
        log(f"note: {busy}; converting into a temporary folder instead")
        lock = None
    try:
        folder = run_dir / CTRANSLATE2 if lock is not None or ours else temporary_folder()
        kept = (export_facts(folder).get("ctranslate2") or {}) if is_export(folder) else {}
        if kept.get("source") == source and intact(folder):  # converted from this checkpoint, files unchanged
            return CTranslate2Model(folder / CTRANSLATE2, kept, in_memory=True)
        if folder.exists() and any(folder.iterdir()) and not is_own_export(folder):
            raise CheckpointError(
                f"{folder} holds files that are not a conversion of this harness: move them away "
                f"(decoding.backend ctranslate2 converts the run's checkpoint there)"
            )
        log(f"converting {ckpt.name} for CTranslate2 into {folder}")
        facts = {"exported_from": f"{run_dir.name}/checkpoints/{ckpt.name}" if in_run else ckpt.name}
        facts.update(commit=harness_commit(), source=source)
        writer = "the command decoding with decoding.backend ctranslate2"
        write_export(
            cfg, tokenizer, model, folder, facts, replace=is_export(folder), backend="ctranslate2", writer=writer
        )
        return CTranslate2Model(folder / CTRANSLATE2, export_facts(folder)["ctranslate2"], in_memory=True)
    finally:
        if lock is not None:
            lock.release()


def intact(folder: Path) -> bool:
    """Whether a conversion's files are the ones it was written with (else it is converted again)."""
    try:
        check_export_files(folder, export_facts(folder))
    except CheckpointError as damaged:
        log(f"note: {str(damaged).split(';')[0]}: converting again")
        return False
    return True


def temporary_folder() -> Path:
    """A folder of this process for a conversion nobody else reads, removed when the process ends."""
    folder = Path(tempfile.mkdtemp(prefix="ctranslate2-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder / "model"
