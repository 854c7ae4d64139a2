"""The cached decoding step: a trained `Seq2SeqTransformer` decoding a few new tokens per call.

`CachedDecoder(model)` is the `Searchable` that `decoding.search` runs on (encode, new_cache,
decode_step, reorder_cache). It computes what the model's plain `encode()` and `decode()` of the
whole prefix compute, the decoder one step at a time: keys and values of earlier positions come from the key/value cache
(`decoding.cache`), the beams of a sentence share its encoder row and cache, and on a CPU the
linear layers take `decoding.linear.linear` and attention `decoding.attend.attend` (docs/DECODING.md).
It reads the model's own modules and weights: nothing is copied, swapped or renamed, so a model
from any checkpoint decodes as it is. The model keeps one readable forward (models/transformer.py);
this path is tested equal to it for every positional encoding, with and without beam reorders
(tests/decoding/test_step.py, test_search.py, test_cache.py, test_cpu_kernel.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Optional

import torch
from torch import Tensor, nn

from decoding.attend import StepPlan, attend, fold_groups, per_head_mask, rows_per_memory_row
from decoding.cache import DecoderCache, SelfAttentionCache
from decoding.linear import linear
from models.attention import MultiHeadAttention
from models.positional_encodings import AttentionPositions, apply_rotary
from models.transformer import DecoderLayer, EncoderLayer, EncoderOutput, FeedForward, Seq2SeqTransformer, merge_mask


@dataclass
class StepMasks:
    """How every decoder layer of one decode call attends (built once per call)."""

    self_mask: Optional[Tensor]  # bool or float; folded per sentence when beams share a cache
    self_index: Optional[Tensor]  # beams' ancestor keys (`DecoderCache.ancestor_keys`), or None
    self_pos: Optional[AttentionPositions]
    cross_mask: Optional[Tensor]
    cross_pos: Optional[AttentionPositions]


class CachedDecoder:
    """A trained model's incremental decoder, with a key/value cache (see the module docstring)."""

    def __init__(self, model: Seq2SeqTransformer) -> None:
        self.model = model

    def encode(self, src: Tensor) -> EncoderOutput:
        """`Seq2SeqTransformer.encode(src)` over the model's own modules, through `linear` and `attend`
        (on a CPU: `W @ xᵀ` for up to `FEW_ROWS` tokens, batched matmuls or the C kernel for short
        sources), so that a search decodes from the same memory, to the bit, as before the model
        lost its fast paths. src: `[batch, src_len]` token ids, right-padded with pad_id."""
        return self.model.encode(src, run_layer=encoder_layer)

    def new_cache(self, capacity: Optional[int] = None) -> DecoderCache:
        """An empty cache; `capacity` (target positions, e.g. the search's length limit) preallocates it."""
        model = self.model
        plan = StepPlan.for_weights(model.tgt_embed.weight, model.d_model // model.num_heads)
        return DecoderCache(len(model.decoder_layers), capacity, plan)

    @staticmethod
    def reorder_cache(
        cache: DecoderCache, index: Tensor, memory_index: Optional[Tensor] = None, groups: Optional[int] = None
    ) -> None:
        """Keep/reorder cached rows in place. Self-attention rows follow `index` (beam reordering,
        dropping finished sentences; beams of a sentence only move a bool ancestry map). The
        cross-attention cache has one row per encoder row: it follows `memory_index` if given (pass
        `index` again when the memory has one row per decoder row) and is left as it is otherwise
        (beams reordered within their sentence). `groups` changes the number of rows per
        sentence (beam search's first step decodes one row per sentence, then `beam`)."""
        cache.reorder(index, memory_index, groups)

    @staticmethod
    def reorder_beams(cache: DecoderCache, parents: Tensor) -> None:
        """Beams reordered within their sentences (`parents` `[sentences, beams]`): the ancestry map
        follows, the keys stay put, nothing is read back to the host."""
        cache.reorder_beams(parents)

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, cache: DecoderCache, offset: int) -> Tensor:
        """Logits `[batch, vocab]` for the next token after `tokens` `[batch, 1]` at position `offset`."""
        return self.decode(tokens, enc, cache, offset)[:, -1]

    def decode(self, tgt: Tensor, enc: EncoderOutput, cache: DecoderCache, offset: int = 0) -> Tensor:
        """Logits `[batch, tgt_len, vocab]` for the new tokens `tgt` `[batch, tgt_len]` at positions
        `offset`.. (`offset`: the tokens already decoded into `cache`, from `new_cache()`); keys and
        values of earlier positions come from the cache.

        `enc` has one row per target row, or one per group of consecutive target rows (the beams
        of a sentence): cross-attention then reads each sentence's memory once for its group.
        """
        model = self.model
        batch, tgt_len = tgt.shape
        groups = rows_per_memory_row(batch, enc.memory.size(0))  # beams: a sentence's rows are consecutive
        cache.extend(batch, enc.memory.size(0), tgt_len, offset, tgt.device)
        positions, k_positions = self._positions(tgt, enc, groups, offset)
        x = model.tgt_embed(tgt) * model.embed_scale  # [batch, tgt_len, d_model]
        x = model.dropout(model.decoder_pe.add_to_embeddings(x, positions))
        masks = self._masks(positions, k_positions, enc, cache)
        for i, layer in enumerate(model.decoder_layers):
            x = decoder_layer(layer, x, enc.memory, masks, cache[i])
        x = model.decoder_norm(x)
        return linear(x, model.output_proj.weight, model.output_proj.bias)  # [batch, tgt_len, vocab]

    def _positions(self, tgt: Tensor, enc: EncoderOutput, groups: int, offset: int) -> tuple[Tensor, Tensor]:
        """The new tokens' positions `[(batch,) tgt_len]` and every key's `[(batch,) offset + tgt_len]`,
        cached ones included: the queries' are taken from the keys', so that a shift or a draw is
        shared by queries and keys alike."""
        batch, tgt_len = tgt.shape
        source_lengths = enc.lengths if groups == 1 else enc.lengths.repeat_interleave(groups)  # [batch]
        model = self.model
        k_positions = model.decoder_pe.positions(
            offset + tgt_len, batch, model.training, tgt.device, source_lengths, None
        )  # [(batch,) k_len]
        return k_positions[..., offset:], k_positions

    def _masks(self, positions: Tensor, k_positions: Tensor, enc: EncoderOutput, cache: DecoderCache) -> StepMasks:
        """The self- and cross-attention masks, score biases and rotary tables of one decode call."""
        model = self.model
        new, offset = cache.length - cache.start, cache.start
        self_pos = model.decoder_pe.self_attention(positions, k_positions)
        bias = self_pos.bias if self_pos is not None else None
        causal = None  # one new query sees every cached key
        if new > 1:
            causal = torch.ones(new, offset + new, dtype=torch.bool, device=positions.device).tril(offset)
        grouped = cache.groups > 1  # beams: rows of a sentence share its cache
        # A beam-search step on CPU: each beam's self-attention reads only its ancestors' keys (an
        # index into the sentence's cache) instead of every beam's keys under an ancestry mask.
        self_index = None
        if grouped and new == 1 and not model.training and cache.plan.ancestor_index:
            self_index = cache.ancestor_keys()  # [sentences, groups, offset + 1]
            self_mask = cache.self_attention_mask(None, bias) if bias is not None else None
        else:
            self_mask = cache.self_attention_mask(causal, bias) if grouped else merge_mask(causal, bias)
        cross_pos = model.decoder_pe.cross_attention(positions, enc.positions)
        cross_mask = merge_mask(enc.src_mask[:, None, None, :], cross_pos.bias if cross_pos is not None else None)
        if not model.training and cache.plan.per_head_masks(cache.groups * new):
            self_mask = per_head_mask(self_mask, cache.sentences, model.num_heads)
            cross_mask = per_head_mask(cross_mask, enc.memory.size(0), model.num_heads)
        return StepMasks(self_mask, self_index, self_pos, cross_mask, cross_pos)


def encoder_layer(
    layer: EncoderLayer, x: Tensor, mask: Optional[Tensor], positions: Optional[AttentionPositions]
) -> Tensor:
    """`EncoderLayer.forward` over the layer's own modules and wiring, through the fast paths."""

    def sa(h: Tensor) -> Tensor:
        attn = layer.self_attn
        q, k, v = attn.split_heads(project(attn.qkv_proj, h), 3)  # [batch, heads, src_len, head_dim]
        if positions is not None:
            q, k = rotate(q, positions.rotary_q, positions), rotate(k, positions.rotary_k, positions)
        return attend_and_project(attn, h, q, k, v, mask, None)

    return layer.run_sublayers(x, sa, partial(feed_forward, layer.ffn))


def decoder_layer(layer: DecoderLayer, x: Tensor, memory: Tensor, masks: StepMasks, cache: dict) -> Tensor:
    """`DecoderLayer.forward` over the layer's own modules and wiring, with the cache and the fast paths."""

    def sa(h: Tensor) -> Tensor:
        return self_attention(layer.self_attn, h, masks.self_mask, masks.self_pos, cache["self"], masks.self_index)

    def ca(h: Tensor) -> Tensor:
        return cross_attention(layer.cross_attn, h, memory, masks.cross_mask, masks.cross_pos, cache["cross"])

    return layer.run_sublayers(x, sa, ca, partial(feed_forward, layer.ffn))


def feed_forward(ffn: FeedForward, x: Tensor) -> Tensor:
    """`FeedForward.forward` through `linear`."""
    hidden = ffn.dropout(ffn.activation(linear(x, ffn.fc1.weight, ffn.fc1.bias)))
    return linear(hidden, ffn.fc2.weight, ffn.fc2.bias)


def project(layer: nn.Linear, x: Tensor) -> Tensor:
    return linear(x, layer.weight, layer.bias)


def rotate(x: Tensor, table: Optional[tuple[Tensor, ...]], positions: AttentionPositions) -> Tensor:
    """`x` with a rotary table applied (RoPE, xPos), or as it is when the encoding has none."""
    return x if table is None else apply_rotary(x, *table, positions.rotary_layout)


def self_attention(
    attn: MultiHeadAttention,
    x: Tensor,
    mask: Optional[Tensor],
    positions: Optional[AttentionPositions],
    cache: SelfAttentionCache,
    key_index: Optional[Tensor],
) -> Tensor:
    """Self-attention of the new positions `x` `[batch, new, d_model]` over every cached key of their
    sentence. This call's keys and values are appended to `cache`; with several rows per sentence
    (beams), `mask` is the folded one the cache builds, and `key_index` (int32 `[sentences,
    groups * new, n]`, `DecoderCache.ancestor_keys`) may stand for it; see `attend`."""
    q, k, v = attn.split_heads(project(attn.qkv_proj, x), 3)  # [batch, heads, new, head_dim]
    if positions is not None:
        q, k = rotate(q, positions.rotary_q, positions), rotate(k, positions.rotary_k, positions)
    k, v = cache.append(k, v)  # every cached key of the sentence: [sentences, heads, k_len * groups, head_dim]
    return attend_and_project(attn, x, q, k, v, mask, key_index)


def cross_attention(
    attn: MultiHeadAttention,
    x: Tensor,
    memory: Tensor,
    mask: Optional[Tensor],
    positions: Optional[AttentionPositions],
    cache: dict,
) -> Tensor:
    """Cross-attention of `x` `[batch, new, d_model]` over `memory` `[batch or batch / beams, src_len,
    d_model]` (the beams of a sentence in consecutive rows share its row). Keys and values are
    computed from the memory at the first call and kept in `cache` (`{"k", "v"}`)."""
    (q,) = attn.split_heads(project(attn.q_proj, x), 1)  # [batch, heads, new, head_dim]
    if positions is not None:
        q = rotate(q, positions.rotary_q, positions)
    if "k" not in cache:
        k, v = attn.split_heads(project(attn.kv_proj, memory), 2)  # [memory_rows, heads, src_len, head_dim]
        if positions is not None:
            k = rotate(k, positions.rotary_k, positions)
        cache["k"], cache["v"] = k.contiguous(), v.contiguous()  # contiguous once: every step reads them as they are
    return attend_and_project(attn, x, q, cache["k"], cache["v"], mask, None)


def attend_and_project(
    attn: MultiHeadAttention,
    x: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Optional[Tensor],
    key_index: Optional[Tensor],
) -> Tensor:
    """`attend` of q `[batch, heads, new, head_dim]` over k, v `[rows, heads, k_len, head_dim]`, then the output
    projection: `[batch, new, d_model]`. With fewer key rows than query rows (the beams of a sentence
    share them), each group of query rows is folded into the query axis."""
    batch, new, _ = x.shape
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.to(q.dtype)
    groups = 1
    if k.size(0) != batch:  # beam search: `groups` query rows share one memory row / one cache sentence
        # Self-attention's mask comes folded already (DecoderCache.self_attention_mask).
        q, folded_mask, groups = fold_groups(q, k.size(0), mask if attn.cross else None)
        mask = folded_mask if attn.cross else mask  # q: [sentences, heads, groups * new, head_dim]
    out = attend(q, k, v, mask, False, attn.dropout if attn.training else 0.0, key_index)
    if groups > 1:
        out = out.unflatten(2, (groups, new)).transpose(1, 2).flatten(0, 1)  # [batch, heads, new, head_dim]
    out = out.transpose(1, 2).reshape(batch, new, attn.d_model)  # [batch, new, d_model]
    return project(attn.out_proj, out)
