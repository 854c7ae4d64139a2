"""Self-contained checkpoints: model, optimizer, scheduler, engine, RNG, config and tokenizer.

Training writes them through Ignite's `Checkpoint`/`DiskSaver` (atomic: temporary file, then
rename). `best_*.pt` files carry the validation score in their name; `last_*.pt` is the newest.
`artifacts/loading.py` rebuilds config, tokenizer and model from one file.
"""

from __future__ import annotations

import math
import pickle
import random
from pathlib import Path
from typing import Any, Optional

import torch

from artifacts.checkpoint_names import checkpoint_score, checkpoint_step
from utils.errors import HarnessError

FORMAT_VERSION = 1


class CheckpointError(HarnessError, RuntimeError):
    """A checkpoint is missing, unreadable or does not fit; the message names the file."""


class RunMeta:
    """Checkpointable holder of the resolved config and the tokenizer (so a checkpoint stands alone)."""

    def __init__(self, config: dict, tokenizer_state: dict) -> None:
        self.config, self.tokenizer_state = config, tokenizer_state

    def state_dict(self) -> dict:
        return {"format_version": FORMAT_VERSION, "config": self.config, "tokenizer": self.tokenizer_state}

    def load_state_dict(self, state: dict) -> None:
        self.config, self.tokenizer_state = state["config"], state["tokenizer"]


class RNGState:
    """Checkpointable random-number-generator state (python, torch CPU, CUDA)."""

    def state_dict(self) -> dict:
        state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state: dict) -> None:
        random.setstate(state["python"])
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


def read_checkpoint(path: str | Path) -> dict:
    """torch.load of tensors and plain data only (`weights_only=True`: unpickling arbitrary objects
    can run code), with a clear error for a missing, truncated, unsafe or foreign file."""
    path = Path(path)
    try:  # one open file throughout: a checkpoint rotated away meanwhile is still read whole
        with open(path, "rb") as f:
            return checked_checkpoint(path, load_open_checkpoint(path, f))
    except IsADirectoryError:
        raise CheckpointError(
            f"{path} is a folder, not a checkpoint file; give a .pt file, or a folder written by export.py"
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        raise CheckpointError(f"checkpoint not found: {path}") from None


def load_open_checkpoint(path: Path, f) -> Any:
    """torch.load of the open file `f` (of `path`), refusing what is not a checkpoint."""
    magic = f.read(4)
    if not magic:
        raise CheckpointError(
            f"{path} is empty (0 bytes: a copy or a write was cut short); restore it from a copy, or delete it"
        )
    if magic != b"PK\x03\x04" and magic[:1] != b"\x80":  # torch's zip format, or a legacy pickle
        raise CheckpointError(
            f"{path} is not a checkpoint (not a PyTorch file); give a .pt written by train.py "
            f"or average.py, or a folder written by export.py"
        )
    f.seek(0)
    try:
        return torch.load(f, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "weights only load failed" not in str(e).lower():
            raise CheckpointError(f"checkpoint {path} is unreadable (truncated or corrupted?): {e}") from None
        first = str(e).splitlines()[-1] if str(e).strip() else ""
        raise CheckpointError(
            f"{path} is not a checkpoint of this harness: it holds Python objects, not only "
            f"tensors and plain data, and loading it could run code, so it was not opened "
            f"({first.strip()[:200]})"
        ) from None
    except Exception as e:  # truncated zip, not a torch file, ...
        raise CheckpointError(
            f"checkpoint {path} is unreadable (truncated or corrupted?): {type(e).__name__}: {e}"
        ) from None


def checked_checkpoint(path: Path, ckpt: Any) -> dict:
    """`ckpt` if it is a checkpoint of this harness in a format it reads; CheckpointError otherwise."""
    if not isinstance(ckpt, dict) or "model" not in ckpt or "meta" not in ckpt:
        raise CheckpointError(f"{path} is not a checkpoint of this project (no 'model'/'meta' entries)")
    version = ckpt["meta"].get("format_version", FORMAT_VERSION) if isinstance(ckpt["meta"], dict) else None
    if version is None or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {version}, newer than this harness reads "
            f"({FORMAT_VERSION}); update the harness"
        )
    return ckpt


def non_finite_tensors(state: dict) -> list[str]:
    """Names of the floating-point tensors in a state dict that hold NaN or infinity."""
    return [
        name
        for name, t in state.items()
        if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all())
    ]


def non_finite_weights(path: str | Path, state: dict, fix: str) -> Optional[str]:
    """What is wrong with a state dict holding NaN or infinite weights (saved after training
    diverged), naming `path` and ending with `fix`; None when every weight is finite. The one text of
    this case: loading refuses such a model, average.py such an input, a resume skips it."""
    bad = non_finite_tensors(state)
    if not bad:
        return None
    return (
        f"{path} has non-finite weights ({len(bad)} tensors, e.g. {bad[0]}): training diverged "
        f"before it was saved; {fix}"
    )


def check_finite_weights(path: str | Path, state: dict, fix: str) -> None:
    """CheckpointError (`non_finite_weights`) when `state` holds NaN or infinite weights: such a
    model would translate into nothing and score 0 as if it were a model."""
    problem = non_finite_weights(path, state, fix)
    if problem:
        raise CheckpointError(problem)


def is_finite_score(value) -> bool:
    return value is not None and math.isfinite(value)


def restore_checkpointer(handler, ckpt_dir: Path, prefix: str) -> None:
    """Let an Ignite `Checkpoint` handler know the files it wrote before a resume, so that it keeps
    rotating them (best by the score in the name, last by step) instead of leaving them behind."""
    rank = checkpoint_score if prefix == "best" else checkpoint_step
    items = sorted((rank(p), p.name) for p in ckpt_dir.glob(f"{prefix}_*.pt") if rank(p) is not None)
    handler.load_state_dict({"_saved": items})


def find_best_checkpoint(run_dir: str | Path) -> Path:
    """The `best_*.pt` with the highest score (scores are 'higher is better'), else the last one."""
    ckpt_dir = Path(run_dir) / "checkpoints"
    best = [p for p in ckpt_dir.glob("best_*.pt") if checkpoint_score(p) is not None]
    if best:
        return max(best, key=lambda p: (checkpoint_score(p), *newest_key(p)))
    return find_last_checkpoint(run_dir)


def newest_key(path: Path) -> tuple[int, float]:
    """Sort key for 'newest': the step in the name, then the modification time. The step comes
    first because copying a run folder (cp, rsync without -t) rewrites modification times."""
    step = checkpoint_step(path)
    return (step if step is not None else -1, path.stat().st_mtime)


def find_last_checkpoint(run_dir: str | Path) -> Path:
    ckpt_dir = Path(run_dir) / "checkpoints"
    if ckpt_dir.exists() and not ckpt_dir.is_dir():
        raise CheckpointError(f"{ckpt_dir} is a file, not the run's folder of checkpoints; move it away")
    last = sorted(ckpt_dir.glob("last_*.pt"), key=newest_key)
    if not last:
        raise CheckpointError(
            f"{run_dir} has no checkpoint yet (none in {ckpt_dir}): train.py writes one at each "
            f"validation; wait for the first (if it is training) or train it again (if it failed)"
        )
    return last[-1]


def read_newest_good_checkpoint(run_dir: str | Path, log=print) -> tuple[Path, dict]:
    """The newest readable `last_*.pt` (then `best_*.pt`); an unreadable one is reported and skipped."""
    ckpt_dir = Path(run_dir) / "checkpoints"
    candidates = sorted(ckpt_dir.glob("last_*.pt"), key=newest_key, reverse=True)
    candidates += sorted(ckpt_dir.glob("best_*.pt"), key=newest_key, reverse=True)
    if not candidates:
        raise CheckpointError(f"no checkpoint in {ckpt_dir}: nothing to resume")
    for path in candidates:
        try:
            state = read_checkpoint(path)
        except CheckpointError as e:
            log(f"warning: {e}; falling back to an older checkpoint")
            continue
        if not {"trainer", "optimizer"} <= set(state):  # average.py's: weights and config only
            log(
                f"warning: {path} holds no training state (an averaged checkpoint, average.py's "
                f"averaged_*.pt renamed?): training cannot continue from it; skipped, falling back "
                f"to an older checkpoint"
            )
            continue
        problem = non_finite_weights(path, state["model"], "skipped, falling back to an older checkpoint")
        if problem:
            log(f"warning: {problem}")
            continue
        return path, state
    raise CheckpointError(f"no readable checkpoint with finite weights in {ckpt_dir}")


def saved_config(ckpt: dict) -> dict:
    """The resolved config a checkpoint holds (`meta.config`), its encoding options completed by the
    encoding so that a checkpoint of an earlier release behaves as it did then."""
    from models.positional_encodings import POSITIONAL_ENCODINGS

    config = ckpt["meta"]["config"]
    model_section = config.get("model", {})
    encoding = POSITIONAL_ENCODINGS.get(model_section.get("positional", {}).get("name"))
    if encoding is not None:
        model_section["positional"] = encoding.upgrade_checkpoint_options(model_section["positional"])
    return config
