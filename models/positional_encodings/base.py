"""The registry, the base class and the hooks every positional encoding implements.

Three hook families (docs/DESIGN.md, with a worked example of adding one); the attention code
never branches on a name:

1. additive absolute (`additive.py`): `add_to_embeddings(x, positions)`;
2. rotary (`rotary.py`): `self_attention()` / `cross_attention()` return cos/sin tables that the
   attention layer applies to q and k *after* the head split;
3. score bias (`score_bias.py`): the same hooks return a float bias `[heads, q_len, k_len]` added
   to the attention scores.

Before any hook, `positions()` says which position each token of a stack sits at: 0, 1, 2, ...
by default, shifted (SHAPE), jittered and scaled (CAPE) or a sorted random subset of a larger
range (the `randomized` option). Positions are explicit (`[len]` or `[batch, len]` tensors, integer
or real) so that incremental decoding at an offset is exact. One instance serves one stack
(encoder or decoder); its tables are computed once per forward and shared by all its layers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from models.positional_options import ENCODING_OPTIONS, NoOptions

POSITIONAL_ENCODINGS: dict[str, type] = {}  # name -> encoding class: what build_positional_encoding builds


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make an encoding selectable as `model.positional.name: <name>`. Its `Options`
    (a dataclass of its keys, models/positional_options.py) are then what config validation uses: a
    built-in encoding's as `ENCODING_OPTIONS` names them, a new encoding's added there."""

    def wrap(cls: type) -> type:
        declared = ENCODING_OPTIONS.setdefault(name, cls.Options)
        if declared is not cls.Options:
            raise TypeError(
                f"encoding {name!r}: its Options are {cls.Options.__name__}, ENCODING_OPTIONS has {declared.__name__}"
            )
        POSITIONAL_ENCODINGS[name] = cls
        cls.registry_name = name
        return cls

    return wrap


@dataclass
class AttentionPositions:
    """What a positional encoding contributes to one attention call.

    rotary_q / rotary_k: (cos, sin), each `[q_len or k_len, rot_dim]` or `[batch, len, rot_dim]`,
      applied to the queries and to the *new* keys of this call (cached keys are stored rotated).
      They may carry a scale (xPos's decay, YaRN's temperature): q and k are multiplied by it.
    bias: float scores `[heads, q_len, k_len]` (or with a leading batch dim), over all keys.
    """

    rotary_q: Optional[tuple[Tensor, Tensor]] = None
    rotary_k: Optional[tuple[Tensor, Tensor]] = None
    rotary_layout: str = "half"
    bias: Optional[Tensor] = None


class PositionalEncoding(nn.Module):
    """Base class: contributes nothing. Subclasses override the hooks they need.

    `Options` is the dataclass of the encoding's own `model.positional` keys (besides `name`); its
    fields are the constructor's keyword arguments, so the config loader can refuse a key that the
    chosen encoding does not take, and its `check` states what values can work.

    `training_length` (a buffer, so it travels in every checkpoint) is the longest sequence this
    stack saw in training, in positions (0 = not recorded): training sets it from the data, the
    length diagnostics read it, and RoPE's YaRN scaling is relative to it.
    """

    registry_name = "base"
    Options: type = NoOptions
    max_positions: Optional[int] = None  # the positions a learned table holds (None: any position)

    def __init__(self, d_model: int, num_heads: int, causal: bool) -> None:
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.causal = causal  # decoder stack (unidirectional relative families)
        self.register_buffer("training_length", torch.zeros((), dtype=torch.long))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # Checkpoints written before the training length was recorded load with it unknown (0).
        state_dict.setdefault(prefix + "training_length", torch.zeros((), dtype=torch.long))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def positions(
        self,
        count: int,
        batch: int,
        training: bool,
        device: torch.device,
        source_lengths: Optional[Tensor] = None,
        lengths: Optional[Tensor] = None,
    ) -> Tensor:
        """The positions of a stack's first `count` tokens: `[count]` (every sequence alike) or
        `[batch, count]`. A decoder's cached steps ask again with a larger `count` and must get the
        same leading positions (at inference; in training every forward is whole).

        source_lengths: `[batch]` real source tokens of each row (for the encoder its own; for
        the decoder its sentence's), for encodings whose inference positions depend on it.
        lengths: `[batch]` real tokens of each row of this stack in a whole forward (None for a
        decoder's cached steps), for encodings whose training draws depend on it.
        """
        return torch.arange(count, device=device)

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: `[batch, len, d_model]` scaled token embeddings; positions `[len]` or `[batch, len]`."""
        return x

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        """Hook for self-attention. k_positions covers all keys (cached ones included)."""
        return None

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        """Hook for cross-attention (target queries over source keys); off unless asked for."""
        return None

    # ---- pictures (visualize.py asks the encoding; it never branches on its name)

    def position_vectors(self, count: int) -> Optional[Tensor]:
        """What the encoding adds to the embeddings at positions 0..count-1, `[count, d_model]` (the
        table plots: pe-heatmap, pe-mds); None where it adds no vector per position."""
        return None

    def similarity(self, position: int, count: int) -> Optional[dict[str, Tensor]]:
        """How self-attention sees `position` against positions 0..count-1 through this encoding: one
        `[count]` curve per label (pe-similarity); by default the dot products of its position
        vectors, None where it has neither."""
        vectors = self.position_vectors(count)
        return None if vectors is None else {"PE(i)·PE(j)": vectors @ vectors[position]}

    @classmethod
    def from_options(cls, options: dict, d_model: int, num_heads: int, causal: bool) -> "PositionalEncoding":
        """Build from the encoding's options (a mapping of `Options` fields; missing ones take defaults)."""
        return cls(d_model, num_heads, causal, **dataclasses.asdict(cls.Options(**options)))

    @classmethod
    def upgrade_checkpoint_options(cls, positional: dict) -> dict:
        """The `model.positional` section of a checkpoint written by an earlier release, completed
        so that the model behaves as it did then (an encoding whose meaning changed overrides)."""
        return positional


def build_positional_encoding(cfg, d_model: int, num_heads: int, causal: bool) -> PositionalEncoding:
    """Builder: the only place that reads the positional config (`name` and the encoding's `options`)."""
    name = cfg.name
    if name not in POSITIONAL_ENCODINGS:
        raise ValueError(f"unknown positional encoding {name!r}; valid: {', '.join(sorted(POSITIONAL_ENCODINGS))}")
    return POSITIONAL_ENCODINGS[name].from_options(cfg.options, d_model, num_heads, causal)
