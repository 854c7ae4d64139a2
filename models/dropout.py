"""Dropout whose CPU masks are cheaper than `torch.nn.Dropout`'s (figures: benchmarks/README.md).

On CPU, `nn.Dropout` draws one Bernoulli variable per element through `bernoulli_`, a
noticeable share of a training step of the 6-layer model. Here
the mask comes from bulk random bits instead: 64-bit words from the default generator, read
as 16-bit lanes and compared with a threshold, so an element is dropped with probability
`round(p * 65536) / 65536` (within 1/131072 of p) and kept ones are scaled by the exact
inverse keep rate, which keeps the expectation unchanged. Only the boolean mask is saved for
backward (1 byte per element instead of a float mask's 4).

The generator is the global one seeded by `torch.manual_seed`, so runs stay reproducible and
resumable exactly as with `nn.Dropout`. On other devices (CUDA has a fused dropout kernel)
and in eval mode this is plain `F.dropout`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LANES = 65536  # 16-bit lanes


def keep_mask(shape: torch.Size, p: float, generator: torch.Generator | None = None) -> tuple[Tensor, float]:
    """A CPU boolean mask (True = keep) with drop rate `round(p * 65536) / 65536`, and the scale
    `1 / keep rate` for the kept elements."""
    dropped = round(p * _LANES)
    count = 1
    for size in shape:
        count *= size
    words = torch.empty((count + 3) // 4, dtype=torch.int64)
    words.random_(-(2**63), None, generator=generator)  # the full 64-bit range: every bit uniform
    lanes = words.view(torch.int16)[:count].view(shape)  # uniform over [-32768, 32767]
    return lanes >= dropped - _LANES // 2, _LANES / (_LANES - dropped)


class _MaskedScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`F.dropout(x, p, training)`, with the cheaper mask on CPU."""
    if not training or p == 0.0 or x.device.type != "cpu" or p >= 1.0 or torch.compiler.is_compiling():
        return F.dropout(x, p, training)
    keep, scale = keep_mask(x.shape, p)
    return _MaskedScale.apply(x, keep, scale)


class BitMaskDropout(nn.Dropout):
    """Drop-in `nn.Dropout` using `dropout` above (same `p`, same state dict, same repr)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)
