"""Relative encodings that add a learned or fixed bias to the attention scores: ALiBi, T5, Shaw,
KERPLE and FIRE.

Each computes a `[heads, q_len, k_len]` bias from the query and key positions, once per stack and
forward, shared by the stack's layers. The encoder is bidirectional, the decoder causal (its mask
hides keys after the query); cross-attention (target queries over source keys) is an ablation,
with its own parameters where the encoding learns any.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from models.positional_encodings.base import AttentionPositions, PositionalEncoding, register
from models.positional_options import FireOptions, ScoreBiasOptions, ShawOptions, T5BiasOptions


class ScoreBiasEncoding(PositionalEncoding):
    """Base of the relative families that add a `[heads, q_len, k_len]` bias to attention scores.

    Subclasses implement `relative_bias(relative, bidirectional, cross)` where `relative = k_pos - q_pos`
    (`[q_len, k_len]` or `[batch, q_len, k_len]`), or `score_bias()` when the bias also depends on
    where the query is (FIRE). The encoder is bidirectional, the decoder causal; cross-attention
    (an ablation) is bidirectional and may use its own parameters (`cross=True`).
    """

    Options = ScoreBiasOptions

    def __init__(self, d_model: int, num_heads: int, causal: bool, cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal)
        self.use_in_cross_attention = cross_attention

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        raise NotImplementedError

    def score_bias(self, q_positions: Tensor, k_positions: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        """`[(batch,) q_len, k_len, heads]`; from the offsets alone unless an encoding overrides it."""
        relative = k_positions.unsqueeze(-2) - q_positions.unsqueeze(-1)  # [(batch,) q_len, k_len]
        return self.relative_bias(relative, bidirectional, cross)

    def _bias(self, q_positions: Tensor, k_positions: Tensor, bidirectional: bool, cross: bool = False) -> Tensor:
        bias = self.score_bias(q_positions, k_positions, bidirectional, cross)  # [(batch,) q_len, k_len, heads]
        return bias.movedim(-1, -3)  # [(batch,) heads, q_len, k_len]

    def self_attention(self, q_positions: Tensor, k_positions: Tensor) -> AttentionPositions:
        return AttentionPositions(bias=self._bias(q_positions, k_positions, bidirectional=not self.causal))

    def cross_attention(self, q_positions: Tensor, k_positions: Tensor) -> Optional[AttentionPositions]:
        if not self.use_in_cross_attention:
            return None
        return AttentionPositions(bias=self._bias(q_positions, k_positions, bidirectional=True, cross=True))

    def similarity(self, position: int, count: int) -> dict[str, Tensor]:
        """The score bias of query `position` over keys 0..count-1, per head."""
        bias = self.self_attention(torch.tensor([position]), torch.arange(count)).bias[:, 0]  # [heads, count]
        return {f"head {h}": bias[h].detach() for h in range(bias.size(0))}


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


def bias_tables(rows: int, heads: int, cross_attention: bool) -> tuple[nn.Embedding, Optional[nn.Embedding]]:
    """A learned scalar per head and row (distance bucket or clipped offset), starting at zero: the
    self-attention table, and cross-attention's own when it is asked for (else None)."""
    tables = [nn.Embedding(rows, heads) for _ in range(2 if cross_attention else 1)]
    for table in tables:
        nn.init.zeros_(table.weight)
    return tables[0], tables[1] if cross_attention else None


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


@register("t5_bias")
class T5RelativeBias(ScoreBiasEncoding):
    """T5 relative position bias: a learned scalar per head and distance bucket, shared by a stack's layers."""

    Options = T5BiasOptions

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        causal: bool,
        num_buckets: int = 32,
        max_distance: int = 128,
        cross_attention: bool = False,
    ) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bias_table, self.cross_table = bias_tables(num_buckets, num_heads, cross_attention)

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        table = self.cross_table if cross else self.bias_table
        buckets = t5_relative_bucket(relative, bidirectional, self.num_buckets, self.max_distance)
        return table(buckets)  # [..., q_len, k_len, heads]


@register("shaw")
class ShawRelativeBias(ScoreBiasEncoding):
    """Shaw et al. (2018) relative positions with clipping distance k, in score-bias form: a learned
    scalar per head for each clipped offset clip(j - i, -k, k) (2k + 1 values; the decoder only
    uses offsets <= 0). Shaw's query-dependent key term and value term are not included."""

    Options = ShawOptions

    def __init__(
        self, d_model: int, num_heads: int, causal: bool, clip_distance: int = 16, cross_attention: bool = False
    ) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.clip_distance = clip_distance
        self.bias_table, self.cross_table = bias_tables(2 * clip_distance + 1, num_heads, cross_attention)

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        table = self.cross_table if cross else self.bias_table
        index = relative.clamp(-self.clip_distance, self.clip_distance) + self.clip_distance
        return table(index)  # [..., q_len, k_len, heads]


def straight_through_min(x: Tensor, floor: float) -> Tensor:
    """max(x, floor) in value, with x's gradient everywhere: a parameter held above a floor can
    still move back up after the floor caught it (the reference implementations clamp in place)."""
    return x + (x.clamp(min=floor) - x).detach()


@register("kerple")
class KerpleLogBias(ScoreBiasEncoding):
    """KERPLE, logarithmic variant (Chi et al. 2022): bias -p_h * log(1 + a_h * |i - j|) with p_h, a_h
    learned per head and kept >= 0.01 (chijames/KERPLE `ParallelKerpleLog`: p ~ U(0, 2), a ~ U(0, 1)
    at start). Symmetric in the encoder; the decoder's causal mask hides keys after the query."""

    FLOOR = 0.01

    def __init__(self, d_model: int, num_heads: int, causal: bool, cross_attention: bool = False) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.power = nn.Parameter(torch.rand(num_heads) * 2)  # p
        self.rate = nn.Parameter(torch.rand(num_heads))  # a
        self.cross_power = nn.Parameter(torch.rand(num_heads) * 2) if cross_attention else None
        self.cross_rate = nn.Parameter(torch.rand(num_heads)) if cross_attention else None

    def relative_bias(self, relative: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        power, rate = (self.cross_power, self.cross_rate) if cross else (self.power, self.rate)
        power, rate = straight_through_min(power, self.FLOOR), straight_through_min(rate, self.FLOOR)
        distance = relative.abs().unsqueeze(-1).to(power.dtype)  # [..., q_len, k_len, 1]
        return -power * torch.log1p(rate * distance)  # [..., q_len, k_len, heads]


@register("fire")
class FireBias(ScoreBiasEncoding):
    """FIRE (Li et al. 2024): bias = MLP(psi(|i - j|) / psi(max(L, i))) with psi(x) = log(c x + 1),
    c > 0 and the threshold L learned (c starts at 1, L at `threshold`), i the query's position and
    one hidden ReLU layer giving one value per head. The paper's form is causal (i >= j); for the
    bidirectional encoder the MLP also reads the direction (1 when the key is after the query, 0
    before), so that keys before and after the query can be told apart; in the causal decoder that
    input is always 0, which is the paper's form."""

    Options = FireOptions

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        causal: bool,
        hidden: int = 32,
        threshold: float = 64.0,
        cross_attention: bool = False,
    ) -> None:
        super().__init__(d_model, num_heads, causal, cross_attention)
        self.mlp = self._mlp(hidden, num_heads)
        self.log_c = nn.Parameter(torch.zeros(()))  # c = exp(log_c) > 0
        self.threshold = nn.Parameter(torch.tensor(float(threshold)))
        self.cross_mlp = self._mlp(hidden, num_heads) if cross_attention else None

    @staticmethod
    def _mlp(hidden: int, heads: int) -> nn.Module:
        return nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, heads))

    def score_bias(self, q_positions: Tensor, k_positions: Tensor, bidirectional: bool, cross: bool) -> Tensor:
        c = self.log_c.exp()
        relative = k_positions.unsqueeze(-2) - q_positions.unsqueeze(-1)  # [(batch,) q_len, k_len]
        distance = torch.log1p(c * relative.abs().to(c.dtype))
        threshold = straight_through_min(self.threshold, 1.0)
        query = torch.maximum(q_positions.to(c.dtype), threshold)  # [(batch,) q_len]
        normalized = distance / torch.log1p(c * query).unsqueeze(-1)  # [(batch,) q_len, k_len]
        after = (relative > 0).to(c.dtype) if bidirectional else torch.zeros_like(normalized)
        mlp = self.cross_mlp if cross else self.mlp
        return mlp(torch.stack([normalized, after], dim=-1))  # [(batch,) q_len, k_len, heads]
