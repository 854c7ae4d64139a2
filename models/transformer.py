"""Encoder-decoder Transformer with pluggable positional encodings and cached decoding.

`encode()` runs the encoder once; `decode()` runs the decoder over a target prefix (all of it
in training, one new token per call with a cache when searching). Positions are explicit:
the decoder's positions start at `offset`, the length of what is already cached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.attention import MultiHeadAttention
from decoding.attend import StepPlan, per_head_mask, rows_per_memory_row
from decoding.cache import DecoderCache
from models.dropout import BitMaskDropout
from decoding.linear import DecodingLinear
from models.positional_encodings import AttentionPositions, PositionalEncoding


@dataclass
class EncoderOutput:
    memory: Tensor  # [batch, src_len, d_model]
    src_mask: Tensor  # [batch, src_len], True at real tokens
    positions: Tensor  # [src_len] or [batch, src_len]
    lengths: Tensor  # [batch], real source tokens (for positional encodings whose positions depend on them)

    def index_select(self, index: Tensor) -> "EncoderOutput":
        """Rows for beams / surviving sentences: index `[new_batch]` into the batch."""
        positions = self.positions.index_select(0, index) if self.positions.dim() == 2 else self.positions
        return EncoderOutput(self.memory.index_select(0, index), self.src_mask.index_select(0, index), positions,
                             self.lengths.index_select(0, index))


def merge_mask(bool_mask: Optional[Tensor], bias: Optional[Tensor]) -> Optional[Tensor]:
    """Fold a score bias into a boolean attention mask (True = attend) as one float mask."""
    if bias is None:
        return bool_mask
    if bool_mask is None:
        return bias
    return bias.masked_fill(~bool_mask, float("-inf"))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, dropout: float, activation: str) -> None:
        super().__init__()
        self.fc1 = DecodingLinear(d_model, ffn_dim)
        self.fc2 = DecodingLinear(ffn_dim, d_model)
        self.dropout = BitMaskDropout(dropout)
        self.activation = F.gelu if activation == "gelu" else F.relu

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 activation: str, norm_first: bool) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = BitMaskDropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, attn_mask: Optional[Tensor], attn_positions: AttentionPositions) -> Tensor:
        if self.norm_first:
            x = x + self.dropout(self.self_attn(self.norm1(x), attn_mask=attn_mask, attn_positions=attn_positions))
            return x + self.dropout(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout(self.self_attn(x, attn_mask=attn_mask, attn_positions=attn_positions)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 activation: str, norm_first: bool) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, attention_dropout, cross=True)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = BitMaskDropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, memory: Tensor, self_mask: Optional[Tensor], is_causal: bool,
                cross_mask: Optional[Tensor], self_pos, cross_pos,
                cache: Optional[dict] = None, self_index: Optional[Tensor] = None) -> Tensor:
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None

        def sa(h: Tensor) -> Tensor:
            return self.self_attn(h, attn_mask=self_mask, is_causal=is_causal, attn_positions=self_pos, cache=self_cache,
                                  key_index=self_index)

        def ca(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory, attn_mask=cross_mask, attn_positions=cross_pos, cache=cross_cache)

        if self.norm_first:
            x = x + self.dropout(sa(self.norm1(x)))
            x = x + self.dropout(ca(self.norm2(x)))
            return x + self.dropout(self.ffn(self.norm3(x)))
        x = self.norm1(x + self.dropout(sa(x)))
        x = self.norm2(x + self.dropout(ca(x)))
        return self.norm3(x + self.dropout(self.ffn(x)))


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer (Vaswani et al. 2017) with a pluggable positional encoding."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, pad_id: int, encoder_pe: PositionalEncoding,
                 decoder_pe: PositionalEncoding, d_model: int = 512, num_heads: int = 8,
                 num_encoder_layers: int = 6, num_decoder_layers: int = 6, ffn_dim: int = 2048,
                 dropout: float = 0.1, attention_dropout: float = 0.0, activation: str = "relu",
                 norm_first: bool = False, share_embeddings: bool = True, tie_output: bool = True) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary (same source and target size)")
        self.pad_id = pad_id
        self.d_model = d_model
        self.num_heads = num_heads
        self.embed_scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = self.src_embed if share_embeddings else nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.encoder_pe, self.decoder_pe = encoder_pe, decoder_pe
        layer_args = (d_model, num_heads, ffn_dim, dropout, attention_dropout, activation, norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.dropout = BitMaskDropout(dropout)
        self.output_proj = DecodingLinear(d_model, tgt_vocab_size, bias=False)  # W @ xᵀ at decoding steps on CPU
        self._reset_parameters()
        if tie_output:
            self.output_proj.weight = self.tgt_embed.weight

    def _reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name and "pe." not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith(".bias") and "pe." not in name:  # an encoding's MLP (FIRE) keeps its own init
                nn.init.zeros_(p)
        for emb in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(emb.weight, mean=0.0, std=self.d_model ** -0.5)
            with torch.no_grad():
                emb.weight[self.pad_id].zero_()

    # ------------------------------------------------------------------ encoder

    def encode(self, src: Tensor) -> EncoderOutput:
        """src: `[batch, src_len]` token ids, right-padded with pad_id."""
        batch, src_len = src.shape
        src_mask = src.ne(self.pad_id)  # [batch, src_len]
        lengths = src_mask.sum(-1)  # [batch]
        positions = self.encoder_pe.positions(src_len, batch, self.training, src.device, lengths,
                                              lengths)  # [src_len] or [batch, src_len]
        x = self.src_embed(src) * self.embed_scale  # [batch, src_len, d_model]
        x = self.dropout(self.encoder_pe.add_to_embeddings(x, positions))
        pos = self.encoder_pe.self_attention(positions, positions)
        key_mask = src_mask[:, None, None, :]  # [batch, 1, 1, src_len]
        attn_mask = merge_mask(key_mask, pos.bias if pos is not None else None)
        for layer in self.encoder_layers:
            x = layer(x, attn_mask, pos)
        return EncoderOutput(self.encoder_norm(x), src_mask, positions, lengths)

    # ------------------------------------------------------------------ decoder

    def decode(self, tgt: Tensor, enc: EncoderOutput, cache: Optional[DecoderCache] = None,
               offset: int = 0) -> Tensor:
        """Logits `[batch, tgt_len, vocab]` for target prefix `tgt` `[batch, tgt_len]` starting at `offset`.

        `enc` has one row per target row, or one per group of consecutive target rows (the beams
        of a sentence): cross-attention then reads each sentence's memory once for its group.

        With a cache (from `new_cache()`), `tgt` holds only the new tokens and `offset` the number
        already decoded; keys and values of earlier positions come from the cache.
        """
        batch, tgt_len = tgt.shape
        groups = rows_per_memory_row(batch, enc.memory.size(0))  # beams: a sentence's rows are consecutive
        if cache is not None:
            cache.extend(batch, enc.memory.size(0), tgt_len, offset, tgt.device)
        elif offset:
            raise ValueError("decode(offset > 0) continues a cached prefix: pass the cache from new_cache()")
        # Every key's position (cached ones included), then the queries' among them: a shift or a
        # draw is then shared by queries and keys alike.
        source_lengths = enc.lengths if groups == 1 else enc.lengths.repeat_interleave(groups)  # [batch]
        lengths = tgt.ne(self.pad_id).sum(-1) if cache is None else None  # a whole forward's own lengths
        k_positions = self.decoder_pe.positions(offset + tgt_len, batch, self.training, tgt.device,
                                                source_lengths, lengths)  # [(batch,) k_len]
        positions = k_positions[..., offset:]  # [(batch,) tgt_len]
        x = self.tgt_embed(tgt) * self.embed_scale  # [batch, tgt_len, d_model]
        x = self.dropout(self.decoder_pe.add_to_embeddings(x, positions))

        self_pos = self.decoder_pe.self_attention(positions, k_positions)
        bias = self_pos.bias if self_pos is not None else None
        is_causal = False
        grouped = cache is not None and cache.groups > 1  # beams: rows of a sentence share its cache
        if tgt_len == 1:
            causal = None  # one new query sees every cached key
        elif offset == 0 and bias is None and not grouped:
            causal, is_causal = None, True  # let SDPA use its fused causal kernel
        else:
            causal = torch.ones(tgt_len, offset + tgt_len, dtype=torch.bool, device=tgt.device).tril(offset)
        # A beam-search step on CPU: each beam's self-attention reads only its ancestors' keys (an
        # index into the sentence's cache) instead of every beam's keys under an ancestry mask.
        self_index = None
        if grouped and tgt_len == 1 and not self.training and cache.plan.ancestor_index:
            self_index = cache.ancestor_keys()  # [sentences, groups, offset + 1]
            self_mask = cache.self_attention_mask(None, bias) if bias is not None else None
        else:
            self_mask = cache.self_attention_mask(causal, bias) if grouped else merge_mask(causal, bias)

        cross_pos = self.decoder_pe.cross_attention(positions, enc.positions)
        cross_mask = merge_mask(enc.src_mask[:, None, None, :], cross_pos.bias if cross_pos is not None else None)
        if cache is not None and not self.training and cache.plan.per_head_masks(cache.groups * tgt_len):
            self_mask = per_head_mask(self_mask, cache.sentences if grouped else batch, self.num_heads)
            cross_mask = per_head_mask(cross_mask, enc.memory.size(0), self.num_heads)
        for i, layer in enumerate(self.decoder_layers):
            x = layer(x, enc.memory, self_mask, is_causal, cross_mask, self_pos, cross_pos,
                      cache[i] if cache is not None else None, self_index)
        return self.output_proj(self.decoder_norm(x))  # [batch, tgt_len, vocab]

    def new_cache(self, capacity: Optional[int] = None) -> DecoderCache:
        """An empty cache; `capacity` (target positions, e.g. the search's length limit) preallocates it."""
        plan = StepPlan.for_weights(self.tgt_embed.weight, self.d_model // self.num_heads)
        return DecoderCache(len(self.decoder_layers), capacity, plan)

    @staticmethod
    def reorder_cache(cache: DecoderCache, index: Tensor, memory_index: Optional[Tensor] = None,
                      groups: Optional[int] = None) -> None:
        """Keep/reorder cached rows in place. Self-attention rows follow `index` (beam reordering,
        dropping finished sentences; beams of a sentence only move a bool ancestry map). The
        cross-attention cache has one row per encoder row: it follows `memory_index` if given (pass
        `index` again when the memory has one row per decoder row) and is left as it is otherwise
        (beams reordered within their sentence). `groups` changes the number of rows per
        sentence (beam search's first step decodes one row per sentence, then `beam`)."""
        cache.reorder(index, memory_index, groups)

    def decode_step(self, tokens: Tensor, enc: EncoderOutput, cache: DecoderCache, offset: int) -> Tensor:
        """Logits `[batch, vocab]` for the next token after `tokens` `[batch, 1]` at position `offset`."""
        return self.decode(tokens, enc, cache=cache, offset=offset)[:, -1]

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits `[batch, tgt_len, vocab]`."""
        return self.decode(tgt_in, self.encode(src))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
