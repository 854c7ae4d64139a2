"""`nn.Linear` with a faster CPU inference path for few rows (decoding steps).

`F.linear` computes `x @ Wᵀ`: the weight is the GEMM's right-hand operand. With few rows (a
decoding step has one per hypothesis) and a weight that comes from main memory every step (a
6-layer decoder's weights do not fit in cache), MKL runs this product slower on a CPU than the
same product the other way round, `W @ xᵀ`, whose result is the output transposed
(docs/DECODING.md and benchmarks/README.md have the figures).
This layer computes the latter and returns its transpose as a view: the same numbers, in a
feature-major layout (`[rows, out]` with strides `(1, rows)`) that the following element-wise
ops read as they are and the next `DecodingLinear` takes again without a copy.

Used only where it pays and is safe: no autograd (inference), a CPU tensor, at most `FEW_ROWS`
rows. Training, GPUs and long inputs (the encoder over a batch) run `F.linear` unchanged.
`benchmarks/decode.py` measures the effect end to end.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FEW_ROWS = 512  # inference inputs with at most this many rows use the transposed product on CPU


class DecodingLinear(nn.Linear):
    """Drop-in `nn.Linear` (same parameters and state dict); see the module docstring."""

    def forward(self, x: Tensor) -> Tensor:
        rows = x.numel() // max(x.size(-1), 1)
        if x.device.type != "cpu" or torch.is_grad_enabled() or not 0 < rows <= FEW_ROWS:
            return F.linear(x, self.weight, self.bias)
        x2d = x.reshape(rows, x.size(-1))  # [rows, in]
        if self.bias is None:
            out = torch.mm(self.weight, x2d.t())  # [out, rows]
        else:
            out = torch.addmm(self.bias[:, None], self.weight, x2d.t())
        return out.t().view(*x.shape[:-1], out.size(0))  # [..., out], feature-major
