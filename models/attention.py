"""Multi-head attention over `F.scaled_dot_product_attention`, with one CPU branch (`scaled_dot_product`).

Positional information arrives as an `AttentionPositions` computed once per stack:
rotary tables are applied to q and k after the head split; score biases are already
folded into `attn_mask` by the stack. This module never looks at an encoding's name.
The cached decoding step (decoding/step.py) reads these modules' weights through its own
path; this one is the plain computation it is tested against.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.positional_encodings import AttentionPositions, apply_rotary

SHORT_QUERY = 16  # on a CPU, up to this many queries per row take two batched matmuls (`scaled_dot_product`)


def short_query_path(device: torch.device, q_len: int) -> bool:
    """Whether attention of `q_len` queries per row runs as two batched matmuls and a softmax."""
    return device.type == "cpu" and q_len <= SHORT_QUERY


def short_path(q: Tensor, is_causal: bool, dropout_p: float) -> bool:
    """Whether attention of q `[batch, heads, q_len, head_dim]` takes the CPU branch (see below)."""
    return (
        not torch.compiler.is_compiling()
        and short_query_path(q.device, q.size(-2))
        and not is_causal
        and dropout_p == 0.0
    )


def scaled_dot_product(
    q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], is_causal: bool, dropout_p: float
) -> Tensor:
    """softmax(q kᵀ / √head_dim + mask) v, `[batch, heads, q_len, head_dim]`.

    The one branch: on a CPU, a few queries per row without dropout or the causal flag are two
    batched matmuls and a softmax, faster than SDPA's CPU kernel at these shapes (a float mask laid
    out `[batch, heads, q_len or 1, k_len]` is added inside the first product). Every run trained
    so far computed this, so a seed still gives the same run. Everything else, compiled code
    included (a branch on the length would guard the graph), is `F.scaled_dot_product_attention`."""
    if not short_path(q, is_causal, dropout_p):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, dropout_p=dropout_p)
    batch, heads, q_len, head_dim = q.shape
    k_len, scale = k.size(-2), head_dim**-0.5
    q3, k3, v3 = q.reshape(-1, q_len, head_dim), k.reshape(-1, k_len, head_dim), v.reshape(-1, k_len, head_dim)
    per_head = attn_mask is not None and attn_mask.dtype != torch.bool and attn_mask.dim() == 4
    if per_head and tuple(attn_mask.shape[:2]) == (batch, heads) and attn_mask.is_contiguous():
        scores = torch.baddbmm(attn_mask.view(-1, attn_mask.size(-2), k_len), q3, k3.transpose(1, 2), alpha=scale)
    else:
        scores = torch.bmm(q3, k3.transpose(1, 2)).mul_(scale)  # [batch * heads, q_len, k_len]
        if attn_mask is not None:
            scores4 = scores.view(batch, heads, q_len, k_len)
            if attn_mask.dtype == torch.bool:
                scores4.masked_fill_(~attn_mask, float("-inf"))
            else:
                scores4.add_(attn_mask)
    return torch.bmm(torch.softmax(scores, dim=-1), v3).view(batch, heads, q_len, head_dim)


class MultiHeadAttention(nn.Module):
    """Self-attention (fused q/k/v projection) or cross-attention (fused k/v over the memory)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, cross: bool = False) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.cross = cross
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        """A projection `[batch, len, parts * d_model]` as `parts` tensors `[batch, heads, len, head_dim]`."""
        batch, length, _ = x.shape
        x = x.view(batch, length, parts, self.num_heads, self.head_dim)  # [batch, len, parts, heads, head_dim]
        return x.permute(2, 0, 3, 1, 4).unbind(0)  # parts x [batch, heads, len, head_dim]

    def forward(
        self,
        x: Tensor,
        memory: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
        attn_positions: Optional[AttentionPositions] = None,
    ) -> Tensor:
        """x: `[batch, q_len, d_model]`; memory: `[batch, src_len, d_model]` for cross-attention.

        attn_mask: bool (True = attend) or float (added to scores), broadcastable to
        `[batch, heads, q_len, k_len]`; `is_causal` without a mask: each query sees the keys up to its own.
        """
        batch, q_len, _ = x.shape
        q, k, v = self.queries_keys_values(x, memory, attn_positions)
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.to(q.dtype)
        dropout_p = self.dropout if self.training else 0.0
        out = scaled_dot_product(q, k, v, attn_mask, is_causal and attn_mask is None, dropout_p)
        out = out.transpose(1, 2).reshape(batch, q_len, self.d_model)  # [batch, q_len, d_model]
        return self.out_proj(out)

    def queries_keys_values(
        self, x: Tensor, memory: Optional[Tensor], positions: Optional[AttentionPositions]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Projected, head-split, rotated (RoPE) q `[batch, heads, q_len, head_dim]` and k, v
        `[batch, heads, k_len, head_dim]` (k_len: the memory's length in cross-attention)."""
        if self.cross:
            if memory is None:
                raise ValueError("cross-attention needs the encoder memory")
            (q,) = self.split_heads(self.q_proj(x), 1)  # [batch, heads, q_len, head_dim]
            k, v = self.split_heads(self.kv_proj(memory), 2)  # [batch, heads, src_len, head_dim]
        else:
            q, k, v = self.split_heads(self.qkv_proj(x), 3)  # [batch, heads, q_len, head_dim]
        if positions is not None and positions.rotary_k is not None:
            k = apply_rotary(k, *positions.rotary_k, positions.rotary_layout)
        if positions is not None and positions.rotary_q is not None:
            q = apply_rotary(q, *positions.rotary_q, positions.rotary_layout)
        return q, k, v

    def attention_weights(
        self,
        x: Tensor,
        memory: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        attn_positions: Optional[AttentionPositions] = None,
    ) -> Tensor:
        """The softmax attention matrix `[batch, heads, q_len, k_len]` (for plots; no dropout)."""
        q, k, _ = self.queries_keys_values(x, memory, attn_positions)
        scores = q @ k.transpose(-1, -2) / self.head_dim**0.5  # [batch, heads, q_len, k_len]
        if attn_mask is not None:
            scores = (
                scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
            )
        return scores.softmax(dim=-1)
