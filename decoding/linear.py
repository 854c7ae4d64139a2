"""`F.linear` with a faster CPU inference path for few rows (decoding steps).

`F.linear` computes `x @ Wᵀ`: the weight is the GEMM's right-hand operand. With few rows (a
decoding step has one per hypothesis) and a weight that comes from main memory every step (a
6-layer decoder's weights do not fit in cache), MKL runs this product slower on a CPU than the
same product the other way round, `W @ xᵀ`, whose result is the output transposed
(docs/DECODING.md and benchmarks/README.md have the figures).
`linear` computes the latter and returns its transpose as a view: the same numbers, in a
feature-major layout (`[rows, out]` with strides `(1, rows)`) that the following element-wise
ops read as they are and the next `linear` takes again without a copy.

A function over a model's own `nn.Linear` weights (the cached decoding step calls it with them,
decoding/step.py), so the model keeps plain layers and its checkpoints their keys. Used only where
it pays and is safe: no autograd (inference), a CPU tensor, at most `FEW_ROWS` rows. Training,
GPUs and long inputs run `F.linear` unchanged. `benchmarks/decode.py` measures the effect end to end.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

FEW_ROWS = 512  # inference inputs with at most this many rows use the transposed product on CPU


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """`F.linear(x, weight, bias)`, computed as `W @ xᵀ` (a feature-major view) where that is faster
    (see the module docstring)."""
    rows = x.numel() // max(x.size(-1), 1)
    if x.device.type != "cpu" or torch.is_grad_enabled() or not 0 < rows <= FEW_ROWS:
        return F.linear(x, weight, bias)
    x2d = x.reshape(rows, x.size(-1))  # [rows, in]
    if bias is None:
        out = torch.mm(weight, x2d.t())  # [out, rows]
    else:
        out = torch.addmm(bias[:, None], weight, x2d.t())
    return out.t().view(*x.shape[:-1], out.size(0))  # [..., out], feature-major
