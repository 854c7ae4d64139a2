"""Several sentence pairs in one row (training.pack_length; the rows are made by data/packing.py).

A packed row holds pairs back to back. The model then computes, for every pair, what it computes
for that pair alone in a row of its own: each token attends only to its own pair's tokens (the
decoder to the earlier ones, and across to its own pair's source), and every pair's positions
start again at 0, drawn by its encoding as for a row of its own (`packed_positions`), so learned,
relative and randomized encodings see what they see unpacked (tests/models/test_packing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

TENSORS = ("src_pair", "src_offset", "tgt_pair", "tgt_offset", "src_lengths", "tgt_lengths")


@dataclass
class Packing:
    """Which pair each token of a packed batch belongs to. Pairs are numbered across the batch,
    in row order; padding has pair -1."""

    src_pair: Tensor  # [batch, src_len]
    src_offset: Tensor  # [batch, src_len]: the token's place in its pair's source (0 at padding)
    tgt_pair: Tensor  # [batch, tgt_len]
    tgt_offset: Tensor  # [batch, tgt_len]: its place in its pair's decoder input
    src_lengths: Tensor  # [pairs]: each pair's source tokens
    tgt_lengths: Tensor  # [pairs]: each pair's decoder input tokens (BOS + target)
    # The longest pair of each side, read where the batch is made (on the host), so that a training
    # step never reads them back from the device.
    src_longest: int
    tgt_longest: int

    @classmethod
    def on(cls, fields: dict, device, non_blocking: bool = False) -> "Packing":
        """The packing of a collated batch (data/packing.py's `packing` fields), its tensors on `device`."""
        return cls(**{k: v.to(device, non_blocking=non_blocking) if k in TENSORS else v for k, v in fields.items()})

    @property
    def pairs(self) -> int:
        return self.src_lengths.numel()


def packed_positions(encoding, pair: Tensor, offset: Tensor, count: int, training: bool, source_lengths, lengths):
    """The positions `[batch, len]` of packed tokens: the encoding's positions of each pair as a row
    of its own (`count`: the longest pair; one call for all pairs, so randomized draws are drawn
    as they would be for the pairs unpacked), read at each token's pair and place."""
    per_pair = encoding.positions(count, source_lengths.numel(), training, pair.device, source_lengths, lengths)
    if per_pair.dim() == 1:  # every pair alike: [count]
        return per_pair[offset]
    return per_pair[pair.clamp(min=0), offset]  # [pairs, count] -> [batch, len]


def within_pairs(q_pair: Tensor, k_pair: Tensor, causal: bool) -> Tensor:
    """Bool `[batch, 1, q_len, k_len]` (True = attend): a token sees its own pair's keys, only the
    earlier ones if `causal` (a pair's tokens are consecutive, so the row's causal order is the
    pair's); a padding query sees every key (its output is never used, and a query that sees
    nothing gives NaN)."""
    allowed = q_pair[:, :, None].eq(k_pair[:, None, :])  # [batch, q_len, k_len]
    if causal:
        allowed = allowed & torch.ones(q_pair.size(1), k_pair.size(1), dtype=torch.bool, device=q_pair.device).tril()
    return (allowed | q_pair.lt(0)[:, :, None])[:, None]
