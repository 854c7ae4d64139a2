"""Rotary encodings: RoPE (with randomized positions and inference-time scaling) and xPos.

Both rotate each head's queries and keys by position-dependent angles after the head split, so
that a score depends on the keys' offset from the query. xPos also scales queries up and keys
down by a per-dimension decay, so scores fade with distance.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from models.positional_encodings.base import AttentionPositions, PositionalEncoding, register
from models.positional_encodings.randomized import RandomizedPositions
from models.positional_options import RopeOptions, XposOptions


def rope_inv_freq(rot_dim: int, theta: float, device=None) -> Tensor:
    """Rotation frequency of each dimension pair i: theta^(-2i/rot_dim), `[rot_dim/2]`."""
    return theta ** (-torch.arange(0, rot_dim, 2, device=device, dtype=torch.float32) / rot_dim)


def rotary_angles(positions: Tensor, inv_freq: Tensor, layout: str) -> Tensor:
    """Angles `[..., rot_dim]` for positions `[...]`: `half` pairs dimension i with i + rot_dim/2
    (GPT-NeoX/LLaMA); `interleaved` pairs 2i with 2i+1 (RoFormer)."""
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # [..., rot_dim/2]
    return torch.cat([angles, angles], dim=-1) if layout == "half" else angles.repeat_interleave(2, dim=-1)


def rope_tables(positions: Tensor, rot_dim: int, theta: float, layout: str) -> tuple[Tensor, Tensor]:
    """cos/sin for rotary embeddings: positions `[...]` -> two `[..., rot_dim]` tensors."""
    angles = rotary_angles(positions, rope_inv_freq(rot_dim, theta, positions.device), layout)
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


def yarn_inv_freq(
    inv_freq: Tensor, factor: float, training_length: int, alpha: float = 1.0, beta: float = 32.0
) -> Tensor:
    """YaRN's frequencies (Peng et al. 2023, "NTK-by-parts"): a pair that turns fewer than `alpha`
    times over the training length is interpolated (frequency / factor), one that turns more than
    `beta` times is kept, and those between are blended linearly in the number of turns."""
    turns = training_length * inv_freq / (2 * math.pi)  # [rot_dim/2]
    keep = ((turns - alpha) / (beta - alpha)).clamp(0.0, 1.0)
    return inv_freq / factor * (1 - keep) + inv_freq * keep


@register("rope")
class RotaryPositionalEncoding(RandomizedPositions, PositionalEncoding):
    """RoPE (Su et al. 2021), per head, in self-attention; in cross-attention only if asked.

    `scaling` (none, linear, ntk, yarn) stretches the rotations by `scaling_factor` so that a model
    meets longer inputs at angles it saw in training: linear divides positions by the factor; ntk
    raises the base theta to theta * factor^(d/(d-2)), which slows the low frequencies most; yarn
    interpolates only the pairs that turn less than once over the stack's training length (the
    `training_length` recorded in the checkpoint), keeps those that turn 32 times or more, and
    multiplies q and k by 0.1 ln(factor) + 1 (a softmax temperature).
    """

    Options = RopeOptions

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        causal: bool,
        theta: float = 10000.0,
        fraction: float = 1.0,
        layout: str = "half",
        cross_attention: bool = False,
        randomized: bool = False,
        max_position: int = 1024,
        scaling: str = "none",
        scaling_factor: float = 2.0,
    ) -> None:
        super().__init__(d_model, num_heads, causal)
        self.init_randomized(randomized, max_position)
        self.theta = theta
        self.layout = layout
        self.rot_dim = max(2, int(self.head_dim * fraction) // 2 * 2)
        self.use_in_cross_attention = cross_attention
        self.scaling, self.scaling_factor = scaling, scaling_factor

    @property
    def needs_training_length(self) -> bool:
        return self.scaling == "yarn"

    @property
    def base(self) -> float:
        """The rotation base in use: theta, raised by NTK scaling (a static change of the base)."""
        if self.scaling != "ntk":
            return self.theta
        factor = self.scaling_factor
        return self.theta * factor ** (self.rot_dim / (self.rot_dim - 2)) if self.rot_dim > 2 else self.theta * factor

    def _tables(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        factor = self.scaling_factor
        if self.scaling == "linear":
            positions = positions.to(torch.float32) / factor
        inv_freq = rope_inv_freq(self.rot_dim, self.base, positions.device)
        if self.scaling != "yarn":
            angles = rotary_angles(positions, inv_freq, self.layout)
            return angles.cos(), angles.sin()
        # (read on the host only outside a CUDA-graph capture: a captured decoding step was checked
        # by its eager first call, decoding/fixed_shape.py)
        length = self.training_length
        capturing = length.is_cuda and torch.cuda.is_current_stream_capturing()
        if not capturing and int(length) < 1:
            raise ValueError(
                "RoPE scaling 'yarn' is relative to the training length, which this model does not "
                "record (trained before 2026-11-26): use scaling linear or ntk"
            )
        angles = rotary_angles(positions, yarn_inv_freq(inv_freq, factor, length), self.layout)
        temperature = 0.1 * math.log(factor) + 1.0
        return angles.cos() * temperature, angles.sin() * temperature

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> AttentionPositions:
        tables = self._tables(q_positions)
        # New keys in self-attention sit at the query positions; cached keys are already rotated.
        return AttentionPositions(rotary_q=tables, rotary_k=tables, rotary_layout=self.layout)

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        if not self.use_in_cross_attention:
            return None
        return AttentionPositions(
            rotary_q=self._tables(q_positions), rotary_k=self._tables(k_positions), rotary_layout=self.layout
        )

    def similarity(self, position: int, count: int) -> dict[str, Tensor]:
        """q·k of a query at `position` and keys at 0..count-1, both all ones before the rotation
        (its scaling and, for xPos, its decay included)."""
        tables = self.self_attention(torch.arange(count), torch.arange(count))
        ones = torch.ones(1, 1, count, self.head_dim)
        q = apply_rotary(ones, *tables.rotary_q, tables.rotary_layout)[0, 0]  # [count, head_dim]
        k = apply_rotary(ones, *tables.rotary_k, tables.rotary_layout)[0, 0]
        return {"q·k (q = k = 1)": k @ q[position]}


@register("xpos")
class XposPositionalEncoding(RotaryPositionalEncoding):
    """xPos (Sun et al. 2023): RoPE whose pair i also decays with distance. Queries at position n
    are multiplied by zeta_i^(n / scale_base) and keys at m by zeta_i^(-m / scale_base), with
    zeta_i = (2i/d + 0.4) / 1.4 (d: rotated dims), so a score carries zeta_i^((n - m) / scale_base),
    as in microsoft/torchscale `xpos_relative_position.py`. The encoder uses the same factorized
    form: there a key after the query (m > n) is weighted up rather than down, as in torchscale's
    bidirectional use of the same module."""

    Options = XposOptions

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        causal: bool,
        theta: float = 10000.0,
        fraction: float = 1.0,
        layout: str = "interleaved",
        scale_base: float = 512.0,
        cross_attention: bool = False,
    ) -> None:
        super().__init__(
            d_model, num_heads, causal, theta=theta, fraction=fraction, layout=layout, cross_attention=cross_attention
        )
        self.scale_base = scale_base

    def _decay(self, positions: Tensor) -> Tensor:
        """zeta^(position / scale_base) per rotated dimension: `[..., rot_dim]`."""
        zeta = (
            torch.arange(0, self.rot_dim, 2, device=positions.device, dtype=torch.float32) / self.rot_dim + 0.4
        ) / 1.4  # [rot_dim/2]
        power = positions.to(torch.float32).unsqueeze(-1) / self.scale_base * zeta.log()  # [..., rot_dim/2]
        power = torch.cat([power, power], dim=-1) if self.layout == "half" else power.repeat_interleave(2, dim=-1)
        return power.exp()

    def _scaled(self, q_positions: Tensor, k_positions: Tensor) -> AttentionPositions:
        (cos_q, sin_q), (cos_k, sin_k) = self._tables(q_positions), self._tables(k_positions)
        up, down = self._decay(q_positions), 1.0 / self._decay(k_positions)
        return AttentionPositions(
            rotary_q=(cos_q * up, sin_q * up), rotary_k=(cos_k * down, sin_k * down), rotary_layout=self.layout
        )

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> AttentionPositions:
        # New keys in self-attention sit at the query positions; cached keys are stored scaled.
        return self._scaled(q_positions, q_positions)

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        return self._scaled(q_positions, k_positions) if self.use_in_cross_attention else None
