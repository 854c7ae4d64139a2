"""Encoder-decoder Transformer with pluggable positional encodings.

`encode()` runs the encoder once; `decode()` runs the decoder over a whole target prefix (teacher
forcing); `forward()` is both. Positions are explicit. This is the plain computation: decoding one
token at a time with a key/value cache and the CPU shortcuts is a separate path over these modules'
weights (`decoding.step.CachedDecoder`), tested equal to `decode()`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.attention import MultiHeadAttention
from models.dropout import BitMaskDropout
from models.packing import Packing, packed_positions, within_pairs
from models.positional_encodings import AttentionPositions, PositionalEncoding

Sublayer = Callable[[Tensor], Tensor]  # one residual block's function: self-/cross-attention or feed-forward


@dataclass
class EncoderOutput:
    memory: Tensor  # [batch, src_len, d_model]
    src_mask: Tensor  # [batch, src_len], True at real tokens
    positions: Tensor  # [src_len] or [batch, src_len]
    lengths: Tensor  # [batch], real source tokens (for positional encodings whose positions depend on them)

    def index_select(self, index: Tensor) -> "EncoderOutput":
        """Rows for beams / surviving sentences: index `[new_batch]` into the batch."""
        positions = self.positions.index_select(0, index) if self.positions.dim() == 2 else self.positions
        return EncoderOutput(
            self.memory.index_select(0, index),
            self.src_mask.index_select(0, index),
            positions,
            self.lengths.index_select(0, index),
        )


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
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.dropout = BitMaskDropout(dropout)
        self.activation = F.gelu if activation == "gelu" else F.relu

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


class EncoderLayer(nn.Module):
    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_dim: int,
        dropout: float,
        attention_dropout: float,
        activation: str,
        norm_first: bool,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = BitMaskDropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, attn_mask: Optional[Tensor], attn_positions: AttentionPositions) -> Tensor:
        def sa(h: Tensor) -> Tensor:
            return self.self_attn(h, attn_mask=attn_mask, attn_positions=attn_positions)

        return self.run_sublayers(x, sa, self.ffn)

    def run_sublayers(self, x: Tensor, self_attention: Sublayer, feed_forward: Sublayer) -> Tensor:
        """The layer's wiring, written once: its sublayers in residual blocks, normalised before
        (`norm_first`) or after. `forward` passes the layer's own sublayers; the cached decoding step
        passes its functions over the same weights (decoding/step.py)."""
        if self.norm_first:
            x = x + self.dropout(self_attention(self.norm1(x)))
            return x + self.dropout(feed_forward(self.norm2(x)))
        x = self.norm1(x + self.dropout(self_attention(x)))
        return self.norm2(x + self.dropout(feed_forward(x)))


class DecoderLayer(nn.Module):
    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_dim: int,
        dropout: float,
        attention_dropout: float,
        activation: str,
        norm_first: bool,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, attention_dropout, cross=True)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = BitMaskDropout(dropout)
        self.norm_first = norm_first

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Optional[Tensor],
        is_causal: bool,
        cross_mask: Optional[Tensor],
        self_pos: Optional[AttentionPositions],
        cross_pos: Optional[AttentionPositions],
    ) -> Tensor:
        def sa(h: Tensor) -> Tensor:
            return self.self_attn(h, attn_mask=self_mask, is_causal=is_causal, attn_positions=self_pos)

        def ca(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory, attn_mask=cross_mask, attn_positions=cross_pos)

        return self.run_sublayers(x, sa, ca, self.ffn)

    def run_sublayers(
        self, x: Tensor, self_attention: Sublayer, cross_attention: Sublayer, feed_forward: Sublayer
    ) -> Tensor:
        """The layer's wiring, written once (see `EncoderLayer.run_sublayers`)."""
        if self.norm_first:
            x = x + self.dropout(self_attention(self.norm1(x)))
            x = x + self.dropout(cross_attention(self.norm2(x)))
            return x + self.dropout(feed_forward(self.norm3(x)))
        x = self.norm1(x + self.dropout(self_attention(x)))
        x = self.norm2(x + self.dropout(cross_attention(x)))
        return self.norm3(x + self.dropout(feed_forward(x)))


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer (Vaswani et al. 2017) with a pluggable positional encoding."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        pad_id: int,
        encoder_pe: PositionalEncoding,
        decoder_pe: PositionalEncoding,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        ffn_dim: int = 2048,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        share_embeddings: bool = True,
        tie_output: bool = True,
    ) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary (same source and target size)")
        self.pad_id = pad_id
        self.d_model = d_model
        self.num_heads = num_heads
        self.embed_scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = (
            self.src_embed if share_embeddings else nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        )
        self.encoder_pe, self.decoder_pe = encoder_pe, decoder_pe
        layer_args = (d_model, num_heads, ffn_dim, dropout, attention_dropout, activation, norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.dropout = BitMaskDropout(dropout)
        self.output_proj = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._reset_parameters()
        if tie_output:
            self.output_proj.weight = self.tgt_embed.weight

    def _reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name and "pe." not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith(".bias") and "pe." not in name:  # an encoding's MLP (FIRE) keeps its own init
                nn.init.zeros_(p)
        for emb in dict.fromkeys((self.src_embed, self.tgt_embed)):  # in this order (a set's follows addresses)
            nn.init.normal_(emb.weight, mean=0.0, std=self.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.pad_id].zero_()

    # ------------------------------------------------------------------ encoder

    def encode(self, src: Tensor, run_layer=None, packing: Optional[Packing] = None) -> EncoderOutput:
        """src: `[batch, src_len]` token ids, right-padded with pad_id (or several sources per row:
        `packing`, models/packing.py). `run_layer(layer, x, mask, positions)` computes one layer
        (default: its own forward; the cached decoder passes its fast path)."""
        batch, src_len = src.shape
        src_mask = src.ne(self.pad_id)  # [batch, src_len]
        lengths = src_mask.sum(-1)  # [batch]
        if packing is None:
            positions = self.encoder_pe.positions(
                src_len, batch, self.training, src.device, lengths, lengths
            )  # [src_len] or [batch, src_len]
            key_mask = src_mask[:, None, None, :]  # [batch, 1, 1, src_len]
        else:  # each source attends within itself, its positions its own
            p = packing
            positions = packed_positions(
                self.encoder_pe, p.src_pair, p.src_offset, p.src_longest, self.training, p.src_lengths, p.src_lengths
            )  # [batch, src_len]
            key_mask = within_pairs(p.src_pair, p.src_pair, causal=False)  # [batch, 1, src_len, src_len]
        x = self.src_embed(src) * self.embed_scale  # [batch, src_len, d_model]
        x = self.dropout(self.encoder_pe.add_to_embeddings(x, positions))
        pos = self.encoder_pe.self_attention(positions, positions)
        attn_mask = merge_mask(key_mask, pos.bias if pos is not None else None)
        for layer in self.encoder_layers:
            x = layer(x, attn_mask, pos) if run_layer is None else run_layer(layer, x, attn_mask, pos)
        return EncoderOutput(self.encoder_norm(x), src_mask, positions, lengths)

    # ------------------------------------------------------------------ decoder

    def decode(self, tgt: Tensor, enc: EncoderOutput, packing: Optional[Packing] = None) -> Tensor:
        """Teacher-forced logits `[batch, tgt_len, vocab]` for the target prefix `tgt` `[batch, tgt_len]`
        (BOS first, right-padded with pad_id), with one encoder row per target row (or several
        pairs per row: `packing`, as given to `encode`)."""
        batch, tgt_len = tgt.shape
        if enc.memory.size(0) != batch:
            raise ValueError(
                f"decode() takes one encoder row per target row: {batch} target rows, "
                f"{enc.memory.size(0)} encoder rows (repeat them with enc.index_select)"
            )
        lengths = tgt.ne(self.pad_id).sum(-1)  # [batch]
        if packing is None:
            positions = self.decoder_pe.positions(
                tgt_len, batch, self.training, tgt.device, enc.lengths, lengths
            )  # [tgt_len] or [batch, tgt_len]
            causal = None  # made below where a mask is needed
            cross_keys = enc.src_mask[:, None, None, :]  # [batch, 1, 1, src_len]
        else:  # each target attends within itself and to its own source, its positions its own
            p = packing
            positions = packed_positions(
                self.decoder_pe, p.tgt_pair, p.tgt_offset, p.tgt_longest, self.training, p.src_lengths, p.tgt_lengths
            )  # [batch, tgt_len]
            causal = within_pairs(p.tgt_pair, p.tgt_pair, causal=True)  # [batch, 1, tgt_len, tgt_len]
            cross_keys = within_pairs(p.tgt_pair, p.src_pair, causal=False)  # [batch, 1, tgt_len, src_len]
        x = self.tgt_embed(tgt) * self.embed_scale  # [batch, tgt_len, d_model]
        x = self.dropout(self.decoder_pe.add_to_embeddings(x, positions))

        self_pos = self.decoder_pe.self_attention(positions, positions)
        if packing is not None or (self_pos is not None and self_pos.bias is not None):
            if causal is None:
                causal = torch.ones(tgt_len, tgt_len, dtype=torch.bool, device=tgt.device).tril()  # [tgt_len, tgt_len]
            self_mask, is_causal = merge_mask(causal, self_pos.bias if self_pos is not None else None), False
        else:
            self_mask, is_causal = None, True  # SDPA's fused causal kernel
        cross_pos = self.decoder_pe.cross_attention(positions, enc.positions)
        cross_mask = merge_mask(cross_keys, cross_pos.bias if cross_pos is not None else None)
        for layer in self.decoder_layers:
            x = layer(x, enc.memory, self_mask, is_causal, cross_mask, self_pos, cross_pos)
        return self.output_proj(self.decoder_norm(x))  # [batch, tgt_len, vocab]

    def forward(self, src: Tensor, tgt_in: Tensor, packing: Optional[Packing] = None) -> Tensor:
        """Teacher-forced logits `[batch, tgt_len, vocab]` (several pairs per row: `packing`)."""
        return self.decode(tgt_in, self.encode(src, packing=packing), packing)

    @property
    def max_positions(self) -> Optional[int]:
        """The longest input or output the model represents (a learnable encoding's table size), or None."""
        return self.encoder_pe.max_positions

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
