"""How attention is computed at decoding steps on CPU: the C kernel, batched matmuls for a few
queries per row, masks laid out once per step, beam ancestors as a key index, and cross-attention
folded per sentence. `attend()` is the one entry point of the cached decoding step
(decoding/step.py); GPUs and long query blocks end in `F.scaled_dot_product_attention`, as the
model's own attention does. Measured speed-ups: benchmarks/README.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from decoding import cpu_kernel
from models import attention as model_attention


def rows_per_memory_row(rows: int, memory_rows: int) -> int:
    """How many consecutive query rows share each memory row (the beams of a sentence; 1 without)."""
    if rows % memory_rows:
        raise ValueError(f"{rows} query rows cannot share {memory_rows} memory rows evenly")
    return rows // memory_rows


def fold_groups(q: Tensor, memory_rows: int, attn_mask: Optional[Tensor]) -> tuple[Tensor, Optional[Tensor], int]:
    """Cross-attention when consecutive query rows share a memory row (the beams of a sentence):
    fold each group into the query axis, so keys and values are stored and read once per
    sentence. q `[rows, heads, q_len, d]` -> `[memory_rows, heads, groups * q_len, d]`; a mask
    that varies along the query axis is repeated to match."""
    rows, heads, q_len, head_dim = q.shape
    groups = rows_per_memory_row(rows, memory_rows)
    q = q.unflatten(0, (memory_rows, groups)).transpose(1, 2).reshape(memory_rows, heads, groups * q_len, head_dim)
    if attn_mask is not None and attn_mask.size(-2) > 1:  # one mask row per query position
        attn_mask = attn_mask.repeat(*([1] * (attn_mask.dim() - 2)), groups, 1)
    return q, attn_mask, groups


def per_head_mask(attn_mask: Optional[Tensor], rows: int, heads: int) -> Optional[Tensor]:
    """`attn_mask` (bool, True = attend, or float added to the scores; broadcastable to
    `[rows, heads, q_len, k_len]`) as one float tensor laid out `[rows, heads, q_len or 1, k_len]`.
    `attend` adds a mask in this form inside the score product, instead of masking the scores
    afterwards in every layer; a decoding step builds it once for all its layers."""
    if attn_mask is None:
        return None
    if attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, device=attn_mask.device).masked_fill_(~attn_mask, float("-inf"))
    return attn_mask.expand(rows, heads, *attn_mask.shape[-2:]).contiguous()


def ancestor_index_path(device: torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    """Whether a beam-search step's self-attention on this device/dtype runs through the C kernel
    with each beam's ancestors as a key index (`attend(key_index=...)`) instead of an ancestry mask."""
    return (
        device.type == "cpu"
        and dtype == torch.float32
        and head_dim % 16 == 0
        and not torch.is_autocast_enabled("cpu")
        and cpu_kernel.available()
    )


@dataclass(frozen=True)
class StepPlan:
    """How a search's decoding steps attend, decided once from the model's device, dtype and head
    size (when the search makes its cache), so that the model code does not test the device:
    `short_queries` -- CPU: a few queries per row take the C kernel or batched matmuls, with masks
    laid out per head once per step; `ancestor_index` -- beams read only their ancestors' keys."""

    short_queries: bool = False
    ancestor_index: bool = False

    @classmethod
    def for_weights(cls, weight: Tensor, head_dim: int) -> "StepPlan":
        return cls(
            short_queries=weight.device.type == "cpu",
            ancestor_index=ancestor_index_path(weight.device, weight.dtype, head_dim),
        )

    def per_head_masks(self, queries_per_row: int) -> bool:
        """Whether a step with this many queries per row should get `per_head_mask` masks."""
        return self.short_queries and queries_per_row <= model_attention.SHORT_QUERY


def index_mask(key_index: Tensor, k_len: int, attn_mask: Optional[Tensor]) -> Tensor:
    """`attn_mask` restricted to the keys of `key_index` `[batch, q_len, n]`: bool `[batch, 1, q_len, k_len]`
    (True = attend), or the float mask with -inf elsewhere."""
    batch, q_len, _ = key_index.shape
    allowed = torch.zeros(batch, 1, q_len, k_len, dtype=torch.bool, device=key_index.device)
    allowed.scatter_(-1, key_index[:, None].long(), True)
    if attn_mask is None:
        return allowed
    if attn_mask.dtype == torch.bool:
        return attn_mask & allowed
    return attn_mask.masked_fill(~allowed, float("-inf"))


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor],
    is_causal: bool,
    dropout_p: float,
    key_index: Optional[Tensor] = None,
) -> Tensor:
    """Scaled dot-product attention. On CPU, a few queries per row (a decoding step: one token, or
    the folded beams of a sentence) go through the C kernel of `cpu_kernel` where it applies
    (fp32, AVX2), else through two batched matmuls and a softmax, both faster than SDPA at these
    shapes (figures: benchmarks/README.md; the matmuls are the model's own branch,
    `models.attention.scaled_dot_product`); a float mask laid out by `per_head_mask` is added
    within the first product. Everything else is `F.scaled_dot_product_attention`.

    key_index: optional int32 `[batch, q_len, n]`, the only keys each query may attend to (on top
    of `attn_mask`): a beam's ancestors in the folded self-attention of a beam-search step. The
    kernel then reads just those keys; the other paths turn the index into a mask."""
    # (compiled code takes SDPA: this CPU-only branch on the query length would guard it, and a
    # batch on the other side of SHORT_QUERY would compile again)
    if model_attention.short_path(q, is_causal, dropout_p) and cpu_kernel.usable(
        q, k, v, attn_mask
    ):  # fp32 on an AVX2 CPU: the C kernel, one pass over keys
        return cpu_kernel.attention(q, k, v, attn_mask, q.size(-1) ** -0.5, key_index)
    if key_index is not None:
        attn_mask = index_mask(key_index, k.size(-2), attn_mask)
    return model_attention.scaled_dot_product(q, k, v, attn_mask, is_causal, dropout_p)  # the model's own
