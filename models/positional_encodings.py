"""Positional encodings, selected by name through a registry.

Three hook families (docs/DESIGN.md, with a worked example of adding one); the attention code
never branches on a name:

1. additive absolute (sinusoidal, learnable, shape, none): `add_to_embeddings(x, positions)`;
2. rotary (rope): `self_attention()` / `cross_attention()` return cos/sin tables that
   the attention layer applies to q and k *after* the head split;
3. score bias (alibi, t5_bias, shaw): the same hooks return a float bias
   `[heads, q_len, k_len]` added to the attention scores.

Positions are always explicit (`[len]` or `[batch, len]` integer tensors) so incremental
decoding with an offset is exact. One instance serves one stack (encoder or decoder);
its tables are computed once per forward and shared by all layers of the stack. Each encoding
declares its config options (`Options`) and checks them (`check_options`).

Every encoding lives in this one file (over the ~400-line guide, on purpose): they are what the
harness compares, and reading them side by side is the point.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Literal, Optional

import torch
from torch import Tensor, nn

POSITIONAL_ENCODINGS: dict[str, type["PositionalEncoding"]] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make an encoding selectable as `model.positional.name: <name>`."""
    def wrap(cls: type) -> type:
        POSITIONAL_ENCODINGS[name] = cls
        cls.registry_name = name
        return cls
    return wrap


@dataclass
class AttentionPositions:
    """What a positional encoding contributes to one attention call.

    rotary_q / rotary_k: (cos, sin), each `[q_len or k_len, rot_dim]` or `[batch, len, rot_dim]`,
      applied to the queries and to the *new* keys of this call (cached keys are stored rotated).
    bias: float scores `[heads, q_len, k_len]` (or with a leading batch dim), over all keys.
    """

    rotary_q: Optional[tuple[Tensor, Tensor]] = None
    rotary_k: Optional[tuple[Tensor, Tensor]] = None
    rotary_layout: str = "half"
    bias: Optional[Tensor] = None


@dataclass
class NoOptions:
    """The options of an encoding that has none: only `name` goes in `model.positional`."""


class PositionalEncoding(nn.Module):
    """Base class: contributes nothing. Subclasses override the hooks they need.

    `Options` is the dataclass of the encoding's own `model.positional` keys (besides `name`); its
    fields are the constructor's keyword arguments, so the config loader can refuse a key that the
    chosen encoding does not take, and `check_options` states what values can work.
    """

    registry_name = "base"
    Options: type = NoOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool) -> None:
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.causal = causal  # decoder stack (unidirectional relative families)

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: `[batch, len, d_model]` scaled token embeddings; positions `[len]` or `[batch, len]`."""
        return x

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        """Hook for self-attention. k_positions covers all keys (cached ones included)."""
        return None

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        """Hook for cross-attention (target queries over source keys); off unless asked for."""
        return None

    @classmethod
    def from_options(cls, options: dict, d_model: int, num_heads: int, causal: bool) -> "PositionalEncoding":
        """Build from the encoding's options (a mapping of `Options` fields; missing ones take defaults)."""
        return cls(d_model, num_heads, causal, **dataclasses.asdict(cls.Options(**options)))

    @classmethod
    def check_options(cls, options, *, head_dim: int, max_len: int) -> None:
        """Raise ValueError naming the `model.positional` key when `options` (an `Options`) cannot
        work with this head size or with inputs of `max_len` tokens; encodings with options override."""

    @classmethod
    def upgrade_checkpoint_options(cls, positional: dict) -> dict:
        """The `model.positional` section of a checkpoint written by an earlier release, completed
        so that the model behaves as it did then (an encoding whose meaning changed overrides)."""
        return positional

    def position_shift(self, batch_size: int, training: bool, device: torch.device) -> Optional[Tensor | int]:
        """Lets an encoding shift a stack's positions (SHAPE), in training and at inference.

        Returns None (no shift, the default), an int (one shift for every sequence) or a
        `[batch_size, 1]` tensor (one shift per sequence). The model adds it to the query positions
        and to the key positions alike (cached keys included), so a decoder's cached steps see
        the same shift as a full forward.
        """
        return None


@register("none")
class NoPositionalEncoding(PositionalEncoding):
    """NoPE: no positional signal. The encoder is then permutation-equivariant."""


def sinusoidal_table(positions: Tensor, d_model: int, base: float = 10000.0) -> Tensor:
    """Vaswani et al. (2017): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d)).

    Interleaved sin/cos, computed for any positions: `[...]` -> `[..., d_model]`.
    """
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
    inv_freq = torch.exp(-math.log(base) * half / d_model)  # [d_model/2]
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # [..., d_model/2]
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # [..., d_model/2, 2]
    return table.flatten(-2)[..., :d_model]  # [..., d_model]


@register("sinusoidal")
class SinusoidalPositionalEncoding(PositionalEncoding):
    """Fixed sinusoidal absolute encoding added to the embeddings; defined for any length."""

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        return x + sinusoidal_table(positions, self.d_model).to(x.dtype)


@dataclass
class LearnableOptions:
    max_positions: int = 1024  # table size; a longer input is an error


@register("learnable")
class LearnablePositionalEncoding(PositionalEncoding):
    """A trained absolute position table of `max_positions` rows (GPT/BERT style)."""

    Options = LearnableOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, max_positions: int) -> None:
        super().__init__(d_model, num_heads, causal)
        self.max_positions = max_positions
        self.table = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    @classmethod
    def check_options(cls, options: LearnableOptions, *, head_dim: int, max_len: int) -> None:
        if options.max_positions < max_len + 1:
            raise ValueError(f"model.positional.max_positions ({options.max_positions}) must be at least "
                             f"data.max_len + 1 ({max_len + 1}: the longest input plus BOS)")

    def add_to_embeddings(self, x: Tensor, positions: Tensor) -> Tensor:
        longest = int(positions.max()) + 1 if positions.numel() else 0
        if longest > self.max_positions:
            raise ValueError(
                f"input needs position {longest - 1} but the learnable positional encoding has only "
                f"{self.max_positions} positions (model.positional.max_positions). Shorten the input "
                f"or train a model with a larger max_positions.")
        return x + self.table(positions).to(x.dtype)


def rope_tables(positions: Tensor, rot_dim: int, theta: float, layout: str) -> tuple[Tensor, Tensor]:
    """cos/sin for rotary embeddings: positions `[...]` -> two `[..., rot_dim]` tensors.

    `half` pairs dimension i with i + rot_dim/2 (GPT-NeoX/LLaMA); `interleaved` pairs 2i with
    2i+1 (RoFormer). Frequency of pair i: theta^(-2i/rot_dim).
    """
    inv_freq = theta ** (-torch.arange(0, rot_dim, 2, device=positions.device, dtype=torch.float32) / rot_dim)
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # [..., rot_dim/2]
    if layout == "half":
        angles = torch.cat([angles, angles], dim=-1)  # [..., rot_dim]
    else:
        angles = angles.repeat_interleave(2, dim=-1)  # [..., rot_dim]
    return angles.cos(), angles.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """Rotate the first `rot_dim` dims of each head. x: `[batch, heads, len, head_dim]`."""
    if cos.dim() == 3:  # per-sequence positions
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [batch, 1, len, rot_dim]
    rot_dim = cos.size(-1)
    x_rot, x_pass = x[..., :rot_dim], x[..., rot_dim:]
    if layout == "half":
        x1, x2 = x_rot.chunk(2, dim=-1)
        rotated = torch.cat([-x2, x1], dim=-1)  # [batch, heads, len, rot_dim]
    else:
        x_pairs = x_rot.unflatten(-1, (-1, 2))  # [batch, heads, len, rot_dim/2, 2]
        rotated = torch.stack([-x_pairs[..., 1], x_pairs[..., 0]], dim=-1).flatten(-2)  # [batch, heads, len, rot_dim]
    out = x_rot * cos.to(x.dtype) + rotated * sin.to(x.dtype)
    return torch.cat([out, x_pass], dim=-1) if x_pass.numel() else out


@dataclass
class RopeOptions:
    theta: float = 10000.0  # base of the rotation frequencies
    fraction: float = 1.0  # share of each head's dimensions that are rotated
    layout: Literal["half", "interleaved"] = "half"  # pairing: i with i + d/2 (NeoX), or 2i with 2i+1
    # Also rotate in cross-attention (queries at target positions, keys at source positions): an
    # ablation, the original report's variant.
    cross_attention: bool = False


@register("rope")
class RotaryPositionalEncoding(PositionalEncoding):
    """RoPE (Su et al. 2021), per head, in self-attention; in cross-attention only if asked."""

    Options = RopeOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, theta: float = 10000.0,
                 fraction: float = 1.0, layout: str = "half", cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal)
        self.theta = theta
        self.layout = layout
        self.rot_dim = max(2, int(self.head_dim * fraction) // 2 * 2)
        self.use_in_cross_attention = cross_attention

    @classmethod
    def check_options(cls, options: RopeOptions, *, head_dim: int, max_len: int) -> None:
        if head_dim % 2:
            raise ValueError(f"rope needs an even head dimension (model.d_model / model.num_heads), got {head_dim}")
        if not 0.0 < options.fraction <= 1.0:
            raise ValueError(f"model.positional.fraction must be in (0, 1], got {options.fraction}")
        if options.theta <= 0:
            raise ValueError(f"model.positional.theta must be positive, got {options.theta}")

    def _tables(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        return rope_tables(positions, self.rot_dim, self.theta, self.layout)

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> AttentionPositions:
        tables = self._tables(q_positions)
        # New keys in self-attention sit at the query positions; cached keys are already rotated.
        return AttentionPositions(rotary_q=tables, rotary_k=tables, rotary_layout=self.layout)

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        if not self.use_in_cross_attention:
            return None
        return AttentionPositions(rotary_q=self._tables(q_positions), rotary_k=self._tables(k_positions),
                                  rotary_layout=self.layout)


# ----------------------------------------------------------------------------- score-bias families


@dataclass
class ScoreBiasOptions:
    # Also add the bias in cross-attention (target positions vs source positions): an ablation.
    cross_attention: bool = False


class ScoreBiasEncoding(PositionalEncoding):
    """Base of the relative families that add a `[heads, q_len, k_len]` bias to attention scores.

    Subclasses implement `relative_bias(relative, bidirectional, cross)` where `relative = k_pos - q_pos`
    (`[q_len, k_len]` or `[batch, q_len, k_len]`). The encoder is bidirectional, the decoder causal;
    cross-attention (an ablation) is bidirectional and may use its own parameters (`cross=True`).
    """

    Options = ScoreBiasOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal)
        self.use_in_cross_attention = cross_attention

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        raise NotImplementedError

    def _bias(self, q_positions: Tensor, k_positions: Tensor, bidirectional: bool, cross: bool = False) -> Tensor:
        relative = k_positions.unsqueeze(-2) - q_positions.unsqueeze(-1)  # [(batch,) q_len, k_len]
        bias = self.relative_bias(relative, bidirectional, cross)  # [(batch,) q_len, k_len, heads]
        return bias.movedim(-1, -3)  # [(batch,) heads, q_len, k_len]

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> AttentionPositions:
        return AttentionPositions(bias=self._bias(q_positions, k_positions, bidirectional=not self.causal))

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        if not self.use_in_cross_attention:
            return None
        return AttentionPositions(bias=self._bias(q_positions, k_positions, bidirectional=True, cross=True))


def alibi_slopes(num_heads: int) -> Tensor:
    """Press et al. (2022): geometric slopes 2^(-8/n), 2^(-16/n), ... for n a power of two; otherwise
    the slopes of the closest smaller power of two, then every other slope of the next one."""
    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(power_of_two(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(power_of_two(closest) + extra)


@register("alibi")
class ALiBiPositionalEncoding(ScoreBiasEncoding):
    """ALiBi: bias -slope_h * |i - j| (symmetric in the encoder; the decoder's causal mask hides j > i)."""

    def __init__(self, d_model: int, num_heads: int, causal: bool, cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        return -relative.abs().unsqueeze(-1).to(self.slopes.dtype) * self.slopes  # [..., q_len, k_len, heads]


def t5_relative_bucket(relative: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucketing of `relative = k_pos - q_pos` (Raffel et al. 2020): exact buckets for small
    distances, logarithmic ones up to `max_distance`, the last bucket beyond. Bidirectional
    buckets give half of the buckets to keys after the query."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)  # only keys at or before the query
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, distance, large)


@dataclass
class T5BiasOptions(ScoreBiasOptions):
    num_buckets: int = 32  # distance buckets (split between the two directions in the encoder)
    max_distance: int = 128  # distances from here on share the last bucket


@register("t5_bias")
class T5RelativeBias(ScoreBiasEncoding):
    """T5 relative position bias: a learned scalar per head and distance bucket, shared by a stack's layers."""

    Options = T5BiasOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, num_buckets: int = 32, max_distance: int = 128,
                 cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bias_table = nn.Embedding(num_buckets, num_heads)
        nn.init.zeros_(self.bias_table.weight)
        self.cross_table = nn.Embedding(num_buckets, num_heads) if cross_attention else None
        if self.cross_table is not None:
            nn.init.zeros_(self.cross_table.weight)

    @classmethod
    def check_options(cls, options: T5BiasOptions, *, head_dim: int, max_len: int) -> None:
        # Bidirectional bucketing gives each side num_buckets/2 buckets, half of them exact: at least
        # one exact bucket per side, and logarithmic buckets need max_distance beyond the exact ones.
        if options.num_buckets < 4:
            raise ValueError(f"model.positional.num_buckets must be at least 4, got {options.num_buckets}")
        if options.max_distance <= options.num_buckets // 2:
            raise ValueError(f"model.positional.max_distance ({options.max_distance}) must exceed "
                             f"num_buckets / 2 ({options.num_buckets // 2}), the exact buckets")

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        table = self.cross_table if cross else self.bias_table
        buckets = t5_relative_bucket(relative, bidirectional, self.num_buckets, self.max_distance)
        return table(buckets)  # [..., q_len, k_len, heads]


@dataclass
class ShawOptions(ScoreBiasOptions):
    clip_distance: int = 16  # offsets beyond +-clip_distance share the outermost value


@register("shaw")
class ShawRelativeBias(ScoreBiasEncoding):
    """Shaw et al. (2018) relative positions with clipping distance k, in score-bias form: a learned
    scalar per head for each clipped offset clip(j - i, -k, k) (2k + 1 values; the decoder only
    uses offsets <= 0). Shaw's query-dependent key term and value term are not included."""

    Options = ShawOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, clip_distance: int = 16,
                 cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.clip_distance = clip_distance
        self.bias_table = nn.Embedding(2 * clip_distance + 1, num_heads)
        nn.init.zeros_(self.bias_table.weight)
        self.cross_table = nn.Embedding(2 * clip_distance + 1, num_heads) if cross_attention else None
        if self.cross_table is not None:
            nn.init.zeros_(self.cross_table.weight)

    @classmethod
    def check_options(cls, options: ShawOptions, *, head_dim: int, max_len: int) -> None:
        if options.clip_distance < 1:
            raise ValueError(f"model.positional.clip_distance must be at least 1, got {options.clip_distance}")

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        table = self.cross_table if cross else self.bias_table
        index = relative.clamp(-self.clip_distance, self.clip_distance) + self.clip_distance
        return table(index)  # [..., q_len, k_len, heads]


@dataclass
class ShapeOptions:
    max_shift: int = 100  # K: training shifts k ~ U{0..K-1} per sequence (K excluded)
    # Inference shift: None = K, the authors' choice; 0 keeps inference positions unshifted (this
    # harness's behaviour before 2026-11-25); any other value is used as is. It changes how a
    # trained model is evaluated, not the model: its role (utils/config_schema.py) lets
    # test.py/inference.py --set change it.
    inference_shift: Optional[int] = dataclasses.field(default=None, metadata={"role": "inference"})


@register("shape")
class ShapePositionalEncoding(SinusoidalPositionalEncoding):
    """SHAPE (Kiyono et al. 2021): sinusoidal positions shifted by a random offset k ~ U{0..K-1}
    (K = `max_shift`, excluded) per sequence in training, independently for source and target,
    and by the fixed shift K at inference, as in the authors' code (butsugiri/shape,
    onmt/modules/embeddings.py). `inference_shift` overrides the inference shift (None: K;
    0: unshifted)."""

    Options = ShapeOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, max_shift: int = 100,
                 inference_shift: Optional[int] = None) -> None:
        super().__init__(d_model, num_heads, causal)
        if max_shift < 1:
            raise ValueError(f"SHAPE needs max_shift >= 1, got {max_shift}")
        if inference_shift is not None and inference_shift < 0:
            raise ValueError(f"SHAPE needs inference_shift >= 0, got {inference_shift}")
        self.max_shift = max_shift
        self.inference_shift = max_shift if inference_shift is None else inference_shift

    @classmethod
    def check_options(cls, options: ShapeOptions, *, head_dim: int, max_len: int) -> None:
        if options.max_shift < 1:
            raise ValueError(f"model.positional.max_shift must be at least 1 (SHAPE draws training shifts "
                             f"from 0..max_shift-1), got {options.max_shift}")
        if options.inference_shift is not None and options.inference_shift < 0:
            raise ValueError(f"model.positional.inference_shift must be >= 0 (or empty: max_shift), "
                             f"got {options.inference_shift}")

    @classmethod
    def upgrade_checkpoint_options(cls, positional: dict) -> dict:
        # Written before SHAPE followed its authors (2026-11-25), in that release's flat spelling of
        # the options: such models were evaluated unshifted.
        if not {"shape_inference_shift", "inference_shift"} & set(positional):
            return {**positional, "shape_inference_shift": 0}
        return positional

    def position_shift(self, batch_size: int, training: bool, device: torch.device) -> Optional[Tensor | int]:
        if training:
            return torch.randint(0, self.max_shift, (batch_size, 1), device=device)  # [batch, 1]
        return self.inference_shift or None


def build_positional_encoding(cfg, d_model: int, num_heads: int, causal: bool) -> PositionalEncoding:
    """Builder: the only place that reads the positional config (`name` and the encoding's `options`)."""
    name = cfg.name
    if name not in POSITIONAL_ENCODINGS:
        raise ValueError(f"unknown positional encoding {name!r}; valid: {', '.join(sorted(POSITIONAL_ENCODINGS))}")
    return POSITIONAL_ENCODINGS[name].from_options(cfg.options, d_model, num_heads, causal)
