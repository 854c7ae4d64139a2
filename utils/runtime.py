"""Small runtime helpers that need torch: seeding, device choice, mixed precision, rank-0-first work
(what a run writes as it goes, without torch: utils/run_log.py)."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from utils.errors import HarnessError

# training.precision / decoding.precision -> the autocast dtype (fp32: no autocast)
AMP_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class DeviceError(HarnessError, RuntimeError):
    """A device that was asked for is not there."""


def autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """Mixed precision for `precision` on the device's type: torch.autocast, or nothing for fp32."""
    dtype = AMP_DTYPES[precision]
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=dtype is not None)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # numpy is optional
        pass


def skip_cudnn_attention() -> None:
    """Keep `scaled_dot_product_attention` off its cuDNN backend (flash / memory-efficient instead).

    cuDNN attention builds an execution plan for every new (batch, length) shape, which costs many
    training steps' time, and token-budget batches have a new shape almost every step of the
    first epochs; the flash / memory-efficient kernels need no plan and are no slower on repeated
    shapes (the H100 measurement: benchmarks/README.md, "On a GPU").
    """
    torch.backends.cuda.enable_cudnn_sdp(False)


def pick_device(name: str = "auto", asked_by: str = "training.device") -> torch.device:
    """`auto` picks cuda, then mps, then cpu; an explicit device that is missing is an error naming
    `asked_by` (the flag or key, and whose, that asked for it).

    On cuda, attention is kept off the cuDNN backend (see `skip_cudnn_attention`).
    """
    if name == "auto":
        if torch.cuda.is_available():
            skip_cudnn_attention()
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceError(
            f"device {name} was asked for ({asked_by}) but no CUDA GPU is visible; use auto (the best "
            f"device there is) or cpu"
        )
    if name.startswith("cuda"):
        skip_cudnn_attention()
    if name == "mps" and not torch.backends.mps.is_available():
        raise DeviceError(f"device mps was asked for ({asked_by}) but MPS is not available; use auto or cpu")
    return torch.device(name)


def device_at_test_time(flag: Optional[str], cfg, model: Path) -> torch.device:
    """Where a trained model runs at test time (test.py, inference.py): --device when given, else its
    config's training.device (as `--set training.device=...` may change it), named with `model`."""
    if flag:
        return pick_device(flag, "--device")
    return pick_device(cfg.training.device, f"training.device of {model}; --device picks another")


def rank0_first(fn: Callable[[], Any], expected: tuple[type[BaseException], ...] = (), share: bool = False) -> Any:
    """Run `fn` on rank 0 while the other ranks wait; return its result on rank 0, and on the other
    ranks too with `share` (a small picklable result), else None there.

    If it raises, every rank raises the same error (an `expected` type keeps its type), so each
    process ends with the same one-line message instead of rank 0's message being buried under
    the others' collective-timeout tracebacks. Single process: just `fn()`."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return fn()
    result, error = None, None
    if dist.get_rank() == 0:
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001 - re-raised below, on every rank
            error = e
    # the error's expected family (an `expected` type it is an instance of), so that a subclass
    # (a CheckpointError is a HarnessError) still ends the other ranks with one line
    family = next((t.__name__ for t in expected if isinstance(error, t)), type(error).__name__)
    payload = [("ok", result if share else None) if error is None else (family, str(error))]
    dist.broadcast_object_list(payload, src=0)
    if error is not None:
        raise error
    status, value = payload[0]
    if status != "ok":
        raise next((t for t in expected if t.__name__ == status), RuntimeError)(value)
    return result if dist.get_rank() == 0 else value
