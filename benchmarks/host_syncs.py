"""Count the host syncs of a piece of training code. Every read of one tensor value into Python
(`float(t)`, `int(t)`, `bool(t)`, `t.item()`) dispatches `aten._local_scalar_dense`, which on a GPU
stops the CPU until the device has caught up; a TorchDispatchMode sees every such call, on a CPU
too, so the count is checked where no GPU is. A copy from an accelerator to the host (`.cpu()`,
`.tolist()` of a GPU tensor) waits as well: counted when a tensor of the call is on one (on a
CPU, `.tolist()` does not dispatch at all)."""

from __future__ import annotations

import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = (torch.ops.aten._local_scalar_dense.default,)
COPY_OPS = (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default)


class CountHostSyncs(TorchDispatchMode):
    """with CountHostSyncs() as syncs: ...; then syncs.count, and syncs.where (the caller's
    file:line of each, innermost frame of this project) to name them."""

    def __init__(self) -> None:
        super().__init__()
        self.where: list[str] = []

    @property
    def count(self) -> int:
        return len(self.where)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SYNC_OPS or (func in COPY_OPS and _to_host_from_device(func, args, kwargs or {})):
            frames = [
                f
                for f in traceback.extract_stack()[:-1]
                if "site-packages" not in f.filename and "host_syncs.py" not in f.filename
            ]
            self.where.append(f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?")
        return func(*args, **(kwargs or {}))


def _to_host_from_device(func, args, kwargs) -> bool:
    """Whether a copy reads an accelerator tensor into host memory."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if func is torch.ops.aten.copy_.default:  # copy_(dst, src)
        return len(tensors) == 2 and tensors[0].device.type == "cpu" and tensors[1].device.type != "cpu"
    target = kwargs.get("device")
    return (
        bool(tensors) and tensors[0].device.type != "cpu" and target is not None and torch.device(target).type == "cpu"
    )
