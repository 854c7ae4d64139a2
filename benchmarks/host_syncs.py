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
# Operators whose output shape depends on the data: on a GPU each waits for the device (and none
# can be captured in a CUDA graph), on a CPU they run unnoticed. Counted with `data_dependent=True`.
DATA_DEPENDENT_OPS = {
    getattr(torch.ops.aten, name)
    for name in (
        "nonzero",
        "nonzero_static",
        "masked_select",
        "unique_dim",
        "_unique",
        "_unique2",
        "unique_consecutive",
    )
}


class CountHostSyncs(TorchDispatchMode):
    """with CountHostSyncs() as syncs: ...; then syncs.count, and syncs.where (the caller's
    file:line of each, innermost frame of this project) to name them.

    With `data_dependent`, also every operator whose output shape depends on the data
    (DATA_DEPENDENT_OPS: `nonzero`, `masked_select`, `unique`, ...) and every `Tensor.tolist()`
    (which on a CPU reads the values without dispatching): what a step must not do to be captured."""

    def __init__(self, data_dependent: bool = False) -> None:
        super().__init__()
        self.where: list[str] = []
        self.data_dependent = data_dependent
        self._tolist = None

    @property
    def count(self) -> int:
        return len(self.where)

    def __enter__(self):
        if self.data_dependent:
            self._tolist = torch.Tensor.tolist
            counter, tolist = self, self._tolist

            def counted_tolist(tensor):
                counter.record()
                return tolist(tensor)

            torch.Tensor.tolist = counted_tolist
        return super().__enter__()

    def __exit__(self, *exc):
        if self._tolist is not None:
            torch.Tensor.tolist = self._tolist
            self._tolist = None
        return super().__exit__(*exc)

    def record(self) -> None:
        frames = [
            f
            for f in traceback.extract_stack()[:-2]
            if "site-packages" not in f.filename and "host_syncs.py" not in f.filename
        ]
        self.where.append(f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if (
            func in SYNC_OPS
            or (func in COPY_OPS and _to_host_from_device(func, args, kwargs or {}))
            or (self.data_dependent and func.overloadpacket in DATA_DEPENDENT_OPS)
        ):
            self.record()
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
