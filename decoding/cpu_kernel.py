"""The C attention kernel for CPU decoding steps (`decoding/csrc/decode_attention.c`).

Built on first use with the system C compiler (`cc -O3 -mavx2 -mfma -fopenmp`, about a second)
into a per-user cache directory, loaded with ctypes, and used by `decoding.attend.attend` for
fp32 decoding steps on x86-64 CPUs with AVX2. Where it cannot be had (another CPU, no compiler,
`PE_CPU_KERNEL=0` in the environment) `attend` keeps its batched-matmul path, with a one-time
warning if a build was tried and failed. `attention(key_index=...)` restricts each query to listed
keys (a beam's ancestors at a beam-search step), which are then the only keys read. Both paths give
the same attention up to float rounding (tests/decoding/test_cpu_kernel.py); `benchmarks/decode.py`
measures the search with it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("csrc") / "decode_attention.c"
FLAGS = ["-O3", "-mavx2", "-mfma", "-fopenmp", "-shared", "-fPIC", "-std=c11"]
ENV_SWITCH = "PE_CPU_KERNEL"  # "0" turns the kernel off (attend then uses batched matmuls)

_state: dict = {}  # "lib": the loaded library or None once decided; "error": why not


def cache_dir() -> Path:
    """Where built kernels live: $PE_KERNEL_CACHE, else $XDG_CACHE_HOME/pe-harness, else ~/.cache/pe-harness."""
    if os.environ.get("PE_KERNEL_CACHE"):
        return Path(os.environ["PE_KERNEL_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pe-harness"


def supported_cpu() -> bool:
    """x86-64 with AVX2 (PyTorch's own CPU capability check, which includes FMA)."""
    machine = platform.machine().lower()
    return machine in ("x86_64", "amd64") and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def _build(compiler: str) -> Path:
    source = SOURCE.read_bytes()
    tag = hashlib.sha256(source + " ".join([compiler] + FLAGS).encode()).hexdigest()[:16]
    target = cache_dir() / f"decode_attention-{tag}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)  # build aside, then rename: atomic
    os.close(fd)
    try:
        run = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", tmp], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{compiler} failed:\n{run.stderr.strip()[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _load() -> Optional[ctypes.CDLL]:
    if "lib" in _state:
        return _state["lib"]
    lib, error = None, None
    if os.environ.get(ENV_SWITCH, "1") == "0":
        error = f"turned off ({ENV_SWITCH}=0)"
    elif not supported_cpu():
        error = "this CPU is not x86-64 with AVX2"
    else:
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            error = "no C compiler found (set CC, or install gcc)"
        else:
            try:
                lib = ctypes.CDLL(str(_build(compiler)))
                fn = lib.decode_attention
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 12 + [ctypes.c_float, ctypes.c_int]
                fn = lib.decode_attention_indexed
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 13 + [ctypes.c_float, ctypes.c_int]
            except (OSError, RuntimeError, AttributeError) as exc:
                lib, error = None, str(exc)
                warnings.warn(
                    f"the CPU decoding attention kernel could not be built, so decoding on CPU uses "
                    f"batched matmuls instead (same results, slower): {error}",
                    RuntimeWarning,
                    stacklevel=3,
                )
    _state["lib"], _state["error"] = lib, error
    return lib


def available() -> bool:
    """Whether `attention()` runs (builds and loads the kernel on the first call)."""
    return _load() is not None


def unavailable_reason() -> Optional[str]:
    _load()
    return _state["error"]


def usable(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor]) -> bool:
    """Whether these inputs fit the kernel: fp32 CPU inference tensors, head_dim a multiple of 16,
    keys/values with unit stride along head_dim, and no mask or a contiguous float mask laid out
    `[batch, heads, 1 or q_len, k_len]` (what `per_head_mask` builds)."""
    batch, heads, q_len, head_dim = q.shape
    if q.device.type != "cpu" or q.dtype != torch.float32 or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    if head_dim % 16 or q.requires_grad or k.requires_grad or v.requires_grad:
        return False
    if k.dim() != 4 or k.shape != v.shape or k.shape[:2] != q.shape[:2] or k.size(-1) != head_dim:
        return False
    if k.stride(-1) != 1 or v.stride(-1) != 1 or k.size(2) == 0:
        return False
    if mask is not None and not (
        mask.dtype == torch.float32
        and mask.dim() == 4
        and mask.is_contiguous()
        and tuple(mask.shape[:2]) == (batch, heads)
        and mask.size(2) in (1, q_len)
        and mask.size(3) == k.size(2)
    ):
        return False
    return available()


def _checked_key_index(key_index: Tensor, batch: int, q_len: int) -> Tensor:
    """`key_index` as the kernel reads it (contiguous int32 `[batch, q_len, n >= 1]` on the CPU)."""
    if (
        key_index.dtype != torch.int32
        or key_index.device.type != "cpu"
        or key_index.dim() != 3
        or tuple(key_index.shape[:2]) != (batch, q_len)
        or key_index.size(2) == 0
    ):
        raise ValueError(
            f"key_index must be int32 [batch, q_len, n] = [{batch}, {q_len}, n >= 1] on the CPU, "
            f"got {key_index.dtype} {tuple(key_index.shape)} on {key_index.device}"
        )
    return key_index.contiguous()


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float, key_index: Optional[Tensor] = None
) -> Tensor:
    """softmax(scale · q kᵀ + mask) v for inputs that pass `usable()`; `[batch, heads, q_len, head_dim]`.

    key_index: optional int32 `[batch, q_len, n]`: query i of row b attends only to keys
    `key_index[b, i]` (the same for every head; all other keys weigh zero and are never read). A
    beam-search step passes each beam's ancestors (`DecoderCache.ancestor_keys`)."""
    lib = _load()
    if lib is None:
        raise RuntimeError(f"the CPU attention kernel is not available: {_state['error']}")
    q = q.contiguous()
    out = torch.empty_like(q)
    batch, heads, q_len, head_dim = q.shape
    mask_ptr, mask_rows = (mask.data_ptr(), mask.size(2)) if mask is not None else (None, 1)
    if key_index is None:
        status = lib.decode_attention(
            q.data_ptr(),
            k.data_ptr(),
            v.data_ptr(),
            mask_ptr,
            out.data_ptr(),
            batch,
            heads,
            q_len,
            k.size(2),
            head_dim,
            *k.stride()[:3],
            *v.stride()[:3],
            mask_rows,
            float(scale),
            torch.get_num_threads(),
        )
    else:
        key_index = _checked_key_index(key_index, batch, q_len)
        status = lib.decode_attention_indexed(
            q.data_ptr(),
            k.data_ptr(),
            v.data_ptr(),
            mask_ptr,
            key_index.data_ptr(),
            out.data_ptr(),
            batch,
            heads,
            q_len,
            k.size(2),
            key_index.size(2),
            head_dim,
            *k.stride()[:3],
            *v.stride()[:3],
            mask_rows,
            float(scale),
            torch.get_num_threads(),
        )
    if status != 0:
        raise RuntimeError(
            f"the CPU attention kernel failed on q {tuple(q.shape)}, k {tuple(k.shape)}"
            + ("" if key_index is None else f", key_index {tuple(key_index.shape)} (out of range?)")
        )
    return out
