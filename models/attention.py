"""Multi-head attention over `F.scaled_dot_product_attention`, with a key/value cache.

Positional information arrives as an `AttentionPositions` computed once per stack:
rotary tables are applied to q and k after the head split; score biases are already
folded into `attn_mask` by the stack. This module never looks at an encoding's name.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from decoding.attend import attend, fold_groups
from decoding.cache import SelfAttentionCache
from decoding.linear import DecodingLinear
from models.positional_encodings import AttentionPositions, apply_rotary

# Cross-attention's cache entry: {"k": [memory_rows, heads, src_len, head_dim], "v": ...}
LayerCache = dict[str, Tensor]


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
            self.q_proj = DecodingLinear(d_model, d_model)
            self.kv_proj = DecodingLinear(d_model, 2 * d_model)
        else:
            self.qkv_proj = DecodingLinear(d_model, 3 * d_model)
        self.out_proj = DecodingLinear(d_model, d_model)

    def _split_heads(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        batch, length, _ = x.shape
        x = x.view(batch, length, parts, self.num_heads, self.head_dim)  # [batch, len, parts, heads, head_dim]
        return x.permute(2, 0, 3, 1, 4).unbind(0)  # parts x [batch, heads, len, head_dim]

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None,
                is_causal: bool = False, attn_positions: Optional[AttentionPositions] = None,
                cache: Optional[LayerCache | SelfAttentionCache] = None, key_index: Optional[Tensor] = None) -> Tensor:
        """x: `[batch, q_len, d_model]`; memory: `[batch, src_len, d_model]` for cross-attention, or
        `[batch / beams, src_len, d_model]` with the beams of a sentence in consecutive rows
        (their keys and values are then computed and cached once per sentence).

        attn_mask: bool (True = attend) or float (added to scores), broadcastable to
        `[batch, heads, q_len, k_len]`. With `cache`, self-attention appends this call's keys and
        values to its `SelfAttentionCache` and attends over all of them (with several rows per cached
        sentence, `attn_mask` must be the folded one the cache builds); cross-attention computes
        them from `memory` once and reuses them afterwards.

        key_index: for self-attention of beams over their sentence's cache, each folded query's
        keys, int32 `[sentences, groups * q_len, n]` (`DecoderCache.ancestor_keys`); see `attend`.
        """
        batch, q_len, _ = x.shape
        q, k, v = self._queries_keys_values(x, memory, attn_positions, cache)
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.to(q.dtype)
        groups = 1
        if k.size(0) != batch:  # beam search: `groups` query rows share one memory row / one cache sentence
            # Self-attention's mask comes folded already (DecoderCache.self_attention_mask).
            q, folded_mask, groups = fold_groups(q, k.size(0), attn_mask if self.cross else None)
            attn_mask = folded_mask if self.cross else attn_mask  # q: [sentences, heads, groups * q_len, head_dim]
        out = attend(q, k, v, attn_mask, is_causal and attn_mask is None,
                     self.dropout if self.training else 0.0, key_index)  # [batch, heads, q_len, head_dim]
        if groups > 1:
            out = out.unflatten(2, (groups, q_len)).transpose(1, 2).flatten(0, 1)  # [batch, heads, q_len, head_dim]
        out = out.transpose(1, 2).reshape(batch, q_len, self.d_model)  # [batch, q_len, d_model]
        return self.out_proj(out)

    def _queries_keys_values(self, x: Tensor, memory: Optional[Tensor], positions: Optional[AttentionPositions],
                             cache: Optional[LayerCache | SelfAttentionCache] = None) -> tuple[Tensor, Tensor, Tensor]:
        """Projected, head-split, rotated (RoPE) q `[batch, heads, q_len, head_dim]` and k, v; with a
        cache, k and v are the cached ones (self-attention: this call's appended)."""
        rotary_q = positions.rotary_q if positions is not None else None
        rotary_k = positions.rotary_k if positions is not None else None
        layout = positions.rotary_layout if positions is not None else "half"
        if self.cross:
            (q,) = self._split_heads(self.q_proj(x), 1)  # [batch, heads, q_len, head_dim]
            if cache is not None and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                if memory is None:
                    raise ValueError("cross-attention needs the encoder memory")
                k, v = self._split_heads(self.kv_proj(memory), 2)  # [batch, heads, src_len, head_dim]
                if rotary_k is not None:
                    k = apply_rotary(k, *rotary_k, layout)
                if cache is not None:  # contiguous once, so that every step reads them without a copy
                    k, v = k.contiguous(), v.contiguous()
                    cache["k"], cache["v"] = k, v
        else:
            q, k, v = self._split_heads(self.qkv_proj(x), 3)  # [batch, heads, q_len, head_dim]
            if rotary_k is not None:
                k = apply_rotary(k, *rotary_k, layout)
            if cache is not None:  # every cached key of the sentence: [sentences, heads, k_len * groups, head_dim]
                k, v = cache.append(k, v)
        if rotary_q is not None:
            q = apply_rotary(q, *rotary_q, layout)
        return q, k, v

    def attention_weights(self, x: Tensor, memory: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None,
                          attn_positions: Optional[AttentionPositions] = None) -> Tensor:
        """The softmax attention matrix `[batch, heads, q_len, k_len]` (for plots; no cache, no dropout)."""
        q, k, _ = self._queries_keys_values(x, memory, attn_positions)
        scores = q @ k.transpose(-1, -2) / self.head_dim ** 0.5  # [batch, heads, q_len, k_len]
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
                else scores + attn_mask
        return scores.softmax(dim=-1)
