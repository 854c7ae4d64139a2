"""What each positional encoding's `model.positional` section may say: its options (a dataclass per
encoding, besides `name`) and `check`, what values can work with a head size and an input length.

Kept apart from the encodings themselves (models/positional_encodings/, which compute with torch) so
that a config is validated without importing torch: compare.py, the archive and the study tools read
configs and never run a model. An encoding registered with `@register(name)` adds its `Options` here
(models/positional_encodings/base.py); the built-in ones are named in `ENCODING_OPTIONS` below.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Optional

INFERENCE = {"role": "inference"}  # an option that changes how a trained model is run, not the model


@dataclass
class NoOptions:
    """The options of an encoding that has none: only `name` goes in `model.positional`."""

    def check(self, *, head_dim: int, max_len: int) -> None:
        """Raise ValueError naming the `model.positional` key when these options cannot work with this
        head size or with inputs of `max_len` tokens; options with constraints override."""


# ----------------------------------------------------------------------------- added to the embeddings


@dataclass
class RandomizedOptions(NoOptions):  # sinusoidal; the `randomized` option of learnable and rope
    randomized: bool = False  # positions: a sorted random subset of 0..max_position-1 (Ruoss et al. 2023)
    max_position: int = 1024  # the range drawn from (with randomized); far above the training lengths

    def check(self, *, head_dim: int, max_len: int) -> None:
        if self.randomized and self.max_position < max_len + 1:
            raise ValueError(
                f"model.positional.max_position ({self.max_position}) must be at least "
                f"data.max_len + 1 ({max_len + 1}) to draw a training sequence's positions"
            )


@dataclass
class LearnableOptions(RandomizedOptions):
    max_positions: int = 1024  # table size; a longer input is an error

    def check(self, *, head_dim: int, max_len: int) -> None:
        if self.max_positions < max_len + 1:
            raise ValueError(
                f"model.positional.max_positions ({self.max_positions}) must be at least "
                f"data.max_len + 1 ({max_len + 1}: the longest input plus BOS)"
            )
        if self.randomized and self.max_positions < self.max_position:
            raise ValueError(
                f"model.positional.max_positions ({self.max_positions}) must be at least "
                f"max_position ({self.max_position}): randomized positions are drawn up to it"
            )
        super().check(head_dim=head_dim, max_len=max_len)


@dataclass
class ShapeOptions(NoOptions):
    max_shift: int = 100  # K: training shifts k ~ U{0..K-1} per sequence (K excluded)
    # Inference shift: None = K, the authors' choice; 0 keeps inference positions unshifted (this
    # harness's behaviour before 2026-11-25); any other value is used as is. It changes how a
    # trained model is evaluated, not the model: its role (settings/schema.py) lets
    # test.py/inference.py --set change it.
    inference_shift: Optional[int] = dataclasses.field(default=None, metadata=INFERENCE)

    def check(self, *, head_dim: int, max_len: int) -> None:
        if self.max_shift < 1:
            raise ValueError(
                f"model.positional.max_shift must be at least 1 (SHAPE draws training shifts "
                f"from 0..max_shift-1), got {self.max_shift}"
            )
        if self.inference_shift is not None and self.inference_shift < 0:
            raise ValueError(
                f"model.positional.inference_shift must be >= 0 (or empty: max_shift), got {self.inference_shift}"
            )


@dataclass
class CapeOptions(NoOptions):
    max_global_shift: float = 5.0  # training: every position of a sequence + delta, delta ~ U[-this, this]
    max_local_shift: float = 0.5  # training: each token + eps, eps ~ U[-this, this]
    max_global_scaling: float = 1.03  # training: the sequence's positions x lambda, log lambda ~ U[-log this, log this]

    def check(self, *, head_dim: int, max_len: int) -> None:
        for key in ("max_global_shift", "max_local_shift"):
            if getattr(self, key) < 0:
                raise ValueError(f"model.positional.{key} must be >= 0, got {getattr(self, key)}")
        if self.max_global_scaling < 1:
            raise ValueError(
                f"model.positional.max_global_scaling must be >= 1 (1: no scaling), got {self.max_global_scaling}"
            )


# ----------------------------------------------------------------------------- rotating queries and keys


def check_rotation(theta: float, fraction: float, head_dim: int) -> None:
    """RoPE's and xPos's shared constraints."""
    if head_dim % 2:
        raise ValueError(f"rope needs an even head dimension (model.d_model / model.num_heads), got {head_dim}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"model.positional.fraction must be in (0, 1], got {fraction}")
    if theta <= 0:
        raise ValueError(f"model.positional.theta must be positive, got {theta}")


@dataclass
class RopeOptions(RandomizedOptions):
    theta: float = 10000.0  # base of the rotation frequencies
    fraction: float = 1.0  # share of each head's dimensions that are rotated
    layout: Literal["half", "interleaved"] = "half"  # pairing: i with i + d/2 (NeoX), or 2i with 2i+1
    # Also rotate in cross-attention (queries at target positions, keys at source positions): an
    # ablation, the original report's variant.
    cross_attention: bool = False
    # Inference-time extension, no retraining: linear = position interpolation (Chen et al. 2023),
    # ntk = NTK-aware base scaling, yarn = YaRN (Peng et al. 2023), by `scaling_factor`.
    scaling: Literal["none", "linear", "ntk", "yarn"] = dataclasses.field(default="none", metadata=INFERENCE)
    scaling_factor: float = dataclasses.field(default=2.0, metadata=INFERENCE)

    def check(self, *, head_dim: int, max_len: int) -> None:
        check_rotation(self.theta, self.fraction, head_dim)
        if self.scaling_factor < 1:
            raise ValueError(
                f"model.positional.scaling_factor must be >= 1 (how many times longer the "
                f"inputs are than the training lengths), got {self.scaling_factor}"
            )
        super().check(head_dim=head_dim, max_len=max_len)
        if self.randomized and self.scaling != "none":
            raise ValueError(
                "model.positional.scaling stretches RoPE past its training positions; with "
                "randomized: true they already span 0..max_position-1: use scaling: none"
            )


@dataclass
class XposOptions(NoOptions):
    theta: float = 10000.0  # base of the rotation frequencies (as RoPE)
    fraction: float = 1.0  # share of each head's dimensions that are rotated (and decayed)
    layout: Literal["half", "interleaved"] = "interleaved"  # torchscale pairs 2i with 2i+1
    scale_base: float = 512.0  # the decay's length unit (torchscale's scale_base)
    cross_attention: bool = False  # also in cross-attention (target queries, source keys): an ablation

    def check(self, *, head_dim: int, max_len: int) -> None:
        check_rotation(self.theta, self.fraction, head_dim)
        if self.scale_base <= 0:
            raise ValueError(f"model.positional.scale_base must be positive, got {self.scale_base}")


# ----------------------------------------------------------------------------- a bias on the attention scores


@dataclass
class ScoreBiasOptions(NoOptions):  # alibi, kerple
    # Also add the bias in cross-attention (target positions vs source positions): an ablation.
    cross_attention: bool = False


@dataclass
class T5BiasOptions(ScoreBiasOptions):
    num_buckets: int = 32  # distance buckets (split between the two directions in the encoder)
    max_distance: int = 128  # distances from here on share the last bucket

    def check(self, *, head_dim: int, max_len: int) -> None:
        # Bidirectional bucketing gives each side num_buckets/2 buckets, half of them exact: at least
        # one exact bucket per side, and logarithmic buckets need max_distance beyond the exact ones.
        if self.num_buckets < 4:
            raise ValueError(f"model.positional.num_buckets must be at least 4, got {self.num_buckets}")
        if self.max_distance <= self.num_buckets // 2:
            raise ValueError(
                f"model.positional.max_distance ({self.max_distance}) must exceed "
                f"num_buckets / 2 ({self.num_buckets // 2}), the exact buckets"
            )


@dataclass
class ShawOptions(ScoreBiasOptions):
    clip_distance: int = 16  # offsets beyond +-clip_distance share the outermost value

    def check(self, *, head_dim: int, max_len: int) -> None:
        if self.clip_distance < 1:
            raise ValueError(f"model.positional.clip_distance must be at least 1, got {self.clip_distance}")


@dataclass
class FireOptions(ScoreBiasOptions):
    hidden: int = 32  # the MLP's hidden units
    threshold: float = 64.0  # the learned threshold L's starting value (positions)

    def check(self, *, head_dim: int, max_len: int) -> None:
        if self.hidden < 1:
            raise ValueError(f"model.positional.hidden must be at least 1, got {self.hidden}")
        if self.threshold < 1:
            raise ValueError(f"model.positional.threshold must be at least 1 (positions), got {self.threshold}")


# name -> Options: what the config (settings/) validates against; `@register` checks that each built-in
# encoding's class declares the same Options and adds a new encoding's
ENCODING_OPTIONS: dict[str, type] = {
    "none": NoOptions,
    "sinusoidal": RandomizedOptions,
    "learnable": LearnableOptions,
    "shape": ShapeOptions,
    "cape": CapeOptions,
    "rope": RopeOptions,
    "xpos": XposOptions,
    "alibi": ScoreBiasOptions,
    "t5_bias": T5BiasOptions,
    "shaw": ShawOptions,
    "kerple": ScoreBiasOptions,
    "fire": FireOptions,
}
