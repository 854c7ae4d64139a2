"""Absolute encodings added to the token embeddings: none, sinusoidal, learnable, SHAPE, CAPE.

SHAPE and CAPE are sinusoidal at augmented positions: in training SHAPE shifts each sequence by a
random integer, CAPE shifts each sequence by a random real offset, jitters every token and scales
the whole sequence; at inference SHAPE uses a fixed shift and CAPE the plain positions.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from models.positional_encodings.base import PositionalEncoding, register
from models.positional_encodings.randomized import RandomizedPositions
from models.positional_options import CapeOptions, LearnableOptions, RandomizedOptions, ShapeOptions


@register("none")
class NoPositionalEncoding(PositionalEncoding):
    """NoPE: no positional signal. The encoder is then permutation-equivariant."""


def sinusoidal_table(positions: Tensor, d_model: int, base: float = 10000.0) -> Tensor:
    """Vaswani et al. (2017): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d)).

    Interleaved sin/cos, computed for any (integer or real) positions: `[...]` -> `[..., d_model]`.
    """
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
    inv_freq = torch.exp(-math.log(base) * half / d_model)  # [d_model/2]
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # [..., d_model/2]
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # [..., d_model/2, 2]
    return table.flatten(-2)[..., :d_model]  # [..., d_model]


class SinusoidalAdded(PositionalEncoding):
    """The sinusoidal table at the stack's positions, added to the embeddings."""

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        return x + sinusoidal_table(positions, self.d_model).to(x.dtype)

    def position_vectors(self, count: int) -> Tensor:
        return sinusoidal_table(torch.arange(count), self.d_model)


@register("sinusoidal")
class SinusoidalPositionalEncoding(RandomizedPositions, SinusoidalAdded):
    """Fixed sinusoidal absolute encoding added to the embeddings; defined for any length."""

    Options = RandomizedOptions

    def __init__(
        self, d_model: int, num_heads: int, causal: bool, randomized: bool = False, max_position: int = 1024
    ) -> None:
        super().__init__(d_model, num_heads, causal)
        self.init_randomized(randomized, max_position)


@register("learnable")
class LearnablePositionalEncoding(RandomizedPositions, PositionalEncoding):
    """A trained absolute position table of `max_positions` rows (GPT/BERT style)."""

    Options = LearnableOptions

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        causal: bool,
        max_positions: int = 1024,
        randomized: bool = False,
        max_position: int = 1024,
    ) -> None:
        super().__init__(d_model, num_heads, causal)
        self.init_randomized(randomized, max_position)
        self.max_positions = max_positions
        self.table = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def positions(
        self,
        count: int,
        batch: int,
        training: bool,
        device: torch.device,
        source_lengths: Optional[Tensor] = None,
        lengths: Optional[Tensor] = None,
    ) -> Tensor:
        # Checked on the count, a host number (randomized draws stay below max_position, within
        # the table): reading the positions back would stop the CPU until the device catches up.
        if not self.randomized and count > self.max_positions:
            raise ValueError(
                f"input needs position {count - 1} but the learnable positional encoding has only "
                f"{self.max_positions} positions (model.positional.max_positions). Shorten the input "
                f"or train a model with a larger max_positions."
            )
        return super().positions(count, batch, training, device, source_lengths, lengths)

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        return x + self.table(positions).to(x.dtype)

    def position_vectors(self, count: int) -> Tensor:
        return self.table.weight[: min(count, self.max_positions)].detach()


@register("shape")
class ShapePositionalEncoding(SinusoidalAdded):
    """SHAPE (Kiyono et al. 2021): sinusoidal positions shifted by a random offset k ~ U{0..K-1}
    (K = `max_shift`, excluded) per sequence in training, independently for source and target,
    and by the fixed shift K at inference, as in the authors' code (butsugiri/shape,
    onmt/modules/embeddings.py). `inference_shift` overrides the inference shift (None: K;
    0: unshifted)."""

    Options = ShapeOptions

    def __init__(
        self, d_model: int, num_heads: int, causal: bool, max_shift: int = 100, inference_shift: Optional[int] = None
    ) -> None:
        super().__init__(d_model, num_heads, causal)
        if max_shift < 1:
            raise ValueError(f"SHAPE needs max_shift >= 1, got {max_shift}")
        if inference_shift is not None and inference_shift < 0:
            raise ValueError(f"SHAPE needs inference_shift >= 0, got {inference_shift}")
        self.max_shift = max_shift
        self.inference_shift = max_shift if inference_shift is None else inference_shift

    @classmethod
    def upgrade_checkpoint_options(cls, positional: dict) -> dict:
        # Written before SHAPE followed its authors (2026-11-25), in that release's flat spelling of
        # the options: such models were evaluated unshifted.
        if not {"shape_inference_shift", "inference_shift"} & set(positional):
            return {**positional, "shape_inference_shift": 0}
        return positional

    def positions(
        self,
        count: int,
        batch: int,
        training: bool,
        device: torch.device,
        source_lengths: Optional[Tensor] = None,
        lengths: Optional[Tensor] = None,
    ) -> Tensor:
        positions = torch.arange(count, device=device)
        if training:  # one shift per sequence; a decoder's queries and keys share it
            return positions + torch.randint(0, self.max_shift, (batch, 1), device=device)  # [batch, count]
        return positions + self.inference_shift  # [count]


@register("cape")
class CapePositionalEncoding(SinusoidalAdded):
    """CAPE (Likhomanenko et al. 2021): sinusoidal at continuous positions, augmented in training
    only: position p of a sequence becomes lambda * (p + delta + eps_p), with one global shift delta
    and one scale lambda per sequence and a local shift eps_p per token (the defaults are the
    reference's example, facebookresearch/CAPE `CAPE1d`); at inference the plain positions. With
    only the global shift it is SHAPE with a real-valued shift (SHAPE: integer, and a fixed
    shift at inference)."""

    Options = CapeOptions

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        causal: bool,
        max_global_shift: float = 5.0,
        max_local_shift: float = 0.5,
        max_global_scaling: float = 1.03,
    ) -> None:
        super().__init__(d_model, num_heads, causal)
        self.max_global_shift, self.max_local_shift = max_global_shift, max_local_shift
        self.max_global_scaling = max_global_scaling

    def positions(
        self,
        count: int,
        batch: int,
        training: bool,
        device: torch.device,
        source_lengths: Optional[Tensor] = None,
        lengths: Optional[Tensor] = None,
    ) -> Tensor:
        positions = torch.arange(count, device=device, dtype=torch.float32)
        if not training:
            return positions  # [count]

        def uniform(shape: tuple[int, ...], bound: float) -> Tensor:
            return (torch.rand(shape, device=device) * 2 - 1) * bound

        delta = uniform((batch, 1), self.max_global_shift)  # [batch, 1]
        eps = uniform((batch, count), self.max_local_shift)  # [batch, count]
        scale = torch.exp(uniform((batch, 1), math.log(self.max_global_scaling)))  # [batch, 1]
        return (positions + delta + eps) * scale  # [batch, count]
