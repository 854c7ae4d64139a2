"""The rotary encodings (models/positional_encodings/rotary.py) against independent computations: RoPE
(the complex formulation), its layouts and fraction, xPos, and the inference-time scalings (linear,
NTK, YaRN)."""

from __future__ import annotations

import cmath
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import BOS, PAD, VOCAB, full_and_cached, tiny_model

from artifacts.checkpoint import CheckpointError
from artifacts.loading import check_training_lengths
from models.attention import MultiHeadAttention
from models.positional_encodings import (
    AttentionPositions,
    RotaryPositionalEncoding,
    XposPositionalEncoding,
    apply_rotary,
    rope_tables,
)
from settings.config import ConfigError, load_config


def xpos_reference_score(q: list[float], k: list[float], n: int, m: int, theta: float, scale_base: float) -> float:
    """Sun et al. (2023) with torchscale's pairing (2i, 2i+1): each pair as a complex number,
    q rotated by n * theta_i and scaled by zeta_i^(n/B), k by m * theta_i and zeta_i^(-m/B)."""
    d = len(q)
    total = 0.0
    for i in range(d // 2):
        freq = theta ** (-2 * i / d)
        zeta = (2 * i / d + 0.4) / 1.4
        qz = complex(q[2 * i], q[2 * i + 1]) * cmath.exp(1j * n * freq) * zeta ** (n / scale_base)
        kz = complex(k[2 * i], k[2 * i + 1]) * cmath.exp(1j * m * freq) * zeta ** (-m / scale_base)
        total += (qz * kz.conjugate()).real
    return total


@pytest.mark.parametrize("scale_base", [512.0, 8.0])
def test_xpos_scores_match_the_published_formula(scale_base):
    pe = XposPositionalEncoding(16, 2, causal=True, scale_base=scale_base)  # head_dim 8, interleaved
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 5, 8, generator=g), torch.randn(1, 2, 5, 8, generator=g)
    n_pos, m_pos = torch.tensor([0, 3, 7, 30, 200]), torch.tensor([0, 1, 9, 30, 150])
    out = pe.cross_attention(n_pos, m_pos)
    assert out is None  # cross-attention only when asked
    pe_cross = XposPositionalEncoding(16, 2, causal=True, scale_base=scale_base, cross_attention=True)
    tables = pe_cross.cross_attention(n_pos, m_pos)
    q_rot = apply_rotary(q, *tables.rotary_q, tables.rotary_layout)
    k_rot = apply_rotary(k, *tables.rotary_k, tables.rotary_layout)
    scores = q_rot @ k_rot.transpose(-1, -2)  # [1, 2, 5, 5]
    for h in range(2):
        for a in range(5):
            for b in range(5):
                expected = xpos_reference_score(
                    q[0, h, a].tolist(), k[0, h, b].tolist(), int(n_pos[a]), int(m_pos[b]), 10000.0, scale_base
                )
                assert scores[0, h, a, b].item() == pytest.approx(expected, rel=1e-4, abs=1e-4)


def test_xpos_self_attention_depends_on_offset_and_decays_with_distance():
    pe = XposPositionalEncoding(16, 2, causal=True, scale_base=16.0)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 2, 1, 8, generator=g), torch.randn(1, 2, 1, 8, generator=g)

    def score(n: int, m: int) -> float:
        tq = pe.self_attention(torch.tensor([n]), torch.tensor([n]))
        tk = pe.self_attention(torch.tensor([m]), torch.tensor([m]))
        return (
            (apply_rotary(q, *tq.rotary_q, "interleaved") * apply_rotary(k, *tk.rotary_k, "interleaved")).sum().item()
        )

    assert score(10, 4) == pytest.approx(score(110, 104), rel=1e-4)  # only n - m matters
    # Against plain RoPE at the same offset, every pair is damped by zeta_i^(offset / B) < 1.
    rope = RotaryPositionalEncoding(16, 2, causal=True, layout="interleaved")
    q1 = apply_rotary(q, *rope.self_attention(torch.tensor([40]), None).rotary_q, "interleaved")
    k1 = apply_rotary(k, *rope.self_attention(torch.tensor([0]), None).rotary_q, "interleaved")
    pairs = (q1 * k1).unflatten(-1, (4, 2)).sum(-1).flatten()  # per-pair RoPE score, heads x pairs
    zeta = torch.tensor([(2 * i / 8 + 0.4) / 1.4 for i in range(4)]) ** (40 / 16)
    assert score(40, 0) == pytest.approx((pairs.view(2, 4) * zeta).sum().item(), rel=1e-4)


def reference_angle(position: float, i: int, rot_dim: int, theta: float) -> float:
    return position * theta ** (-2 * i / rot_dim)


def rope_with(**options) -> RotaryPositionalEncoding:
    return RotaryPositionalEncoding(32, 2, causal=True, layout="interleaved", **options)  # rot_dim 16


def angles_of(pe: RotaryPositionalEncoding, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = pe.self_attention(positions, positions).rotary_q
    return torch.atan2(sin, cos)[..., 0::2], torch.sqrt(cos**2 + sin**2)[..., 0::2]  # per pair


def test_linear_scaling_is_position_interpolation():
    angles, norm = angles_of(rope_with(scaling="linear", scaling_factor=4.0), torch.tensor([0, 5, 12]))
    for a, p in enumerate([0, 5, 12]):
        for i in range(8):
            expected = reference_angle(p / 4.0, i, 16, 10000.0)
            assert math.remainder(angles[a, i].item() - expected, 2 * math.pi) == pytest.approx(0, abs=1e-5)
    assert torch.allclose(norm, torch.ones_like(norm))


def test_ntk_scaling_raises_the_base():
    angles, _ = angles_of(rope_with(scaling="ntk", scaling_factor=4.0), torch.tensor([3, 11]))
    base = 10000.0 * 4.0 ** (16 / 14)
    for a, p in enumerate([3, 11]):
        for i in range(8):
            expected = reference_angle(p, i, 16, base)
            assert math.remainder(angles[a, i].item() - expected, 2 * math.pi) == pytest.approx(0, abs=1e-5)
    # The highest frequency is kept, the lowest divided by the factor.
    assert math.isclose(base**0, 1.0) and math.isclose(base ** (-14 / 16), 10000.0 ** (-14 / 16) / 4.0, rel_tol=1e-9)


def test_yarn_interpolates_slow_pairs_keeps_fast_ones_and_sets_the_temperature():
    length, factor = 24, 4.0
    pe = rope_with(scaling="yarn", scaling_factor=factor)
    with pytest.raises(ValueError, match="training length"):
        pe.self_attention(torch.tensor([1]), None)
    pe.training_length.fill_(length)
    angles, norm = angles_of(pe, torch.tensor([7]))
    for i in range(8):
        freq = 10000.0 ** (-2 * i / 16)
        wavelength = 2 * math.pi / freq
        turns = length / wavelength  # YaRN's r(d) = L / lambda_d
        gamma = 0.0 if turns < 1 else 1.0 if turns > 32 else (turns - 1) / 31
        expected = 7 * ((1 - gamma) * freq / factor + gamma * freq)
        assert math.remainder(angles[0, i].item() - expected, 2 * math.pi) == pytest.approx(0, abs=1e-5)
    assert torch.allclose(norm, torch.full_like(norm, 0.1 * math.log(factor) + 1.0))  # sqrt(1/t) on q and k


def test_scaling_none_is_plain_rope_and_options_are_inference_keys():
    plain, none = RotaryPositionalEncoding(32, 2, True), rope_with(scaling="none")
    positions = torch.arange(9)
    torch.testing.assert_close(
        none.self_attention(positions, positions).rotary_q,
        RotaryPositionalEncoding(32, 2, True, layout="interleaved").self_attention(positions, positions).rotary_q,
    )
    assert plain.scaling == "none"
    from settings.key_roles import may_change

    assert may_change("model.positional.scaling", "test", "rope")
    assert may_change("model.positional.scaling_factor", "test", "rope")
    assert not may_change("model.positional.theta", "test", "rope")
    with pytest.raises(ConfigError, match="randomized"):  # its positions already span the range
        load_config(
            raw={
                "model": {
                    "d_model": 32,
                    "num_heads": 4,
                    "positional": {"name": "rope", "randomized": True, "scaling": "yarn"},
                }
            }
        )
    with pytest.raises(ConfigError, match="scaling_factor"):
        load_config(
            raw={
                "model": {
                    "d_model": 32,
                    "num_heads": 4,
                    "positional": {"name": "rope", "scaling": "ntk", "scaling_factor": 0.5},
                }
            }
        )


def test_yarn_cached_decoding_equals_full_and_needs_a_recorded_length():
    model = tiny_model("rope", seed=7, scaling="yarn", scaling_factor=3.0)
    with pytest.raises(CheckpointError, match="yarn"):
        check_training_lengths(model, "ckpt.pt")
    model.encoder_pe.training_length.fill_(6)
    model.decoder_pe.training_length.fill_(7)
    check_training_lengths(model, "ckpt.pt")
    g = torch.Generator().manual_seed(7)
    src = torch.randint(4, VOCAB, (2, 9), generator=g)
    src[1, 6:] = PAD
    tgt = torch.cat([torch.full((2, 1), BOS), torch.randint(4, VOCAB, (2, 8), generator=g)], dim=1)
    full, steps = full_and_cached(model, src, tgt)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def rope_reference(x: torch.Tensor, positions: torch.Tensor, rot_dim: int, theta: float, layout: str) -> torch.Tensor:
    """Independent complex-number RoPE (Su et al. 2021) in float64.

    x: `[batch, heads, len, head_dim]`; positions `[len]` or `[batch, len]`. Pair i (frequency
    theta^(-2i/rot_dim)) is the complex number x[2i] + j x[2i+1] (`interleaved`) or
    x[i] + j x[i + rot_dim/2] (`half`), multiplied by e^(j * position * frequency).
    Dimensions from rot_dim on pass through.
    """
    x = x.double()
    half = rot_dim // 2
    freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / rot_dim)  # [half]
    angle = positions.double().unsqueeze(-1) * freq  # [len, half] or [batch, len, half]
    if angle.dim() == 3:
        angle = angle.unsqueeze(1)  # [batch, 1, len, half]
    rotation = torch.polar(torch.ones_like(angle), angle)
    x_rot, x_pass = x[..., :rot_dim], x[..., rot_dim:]
    if layout == "interleaved":
        z = torch.view_as_complex(x_rot.reshape(*x_rot.shape[:-1], half, 2).contiguous())
        out = torch.view_as_real(z * rotation).flatten(-2)
    elif layout == "half":
        z = torch.complex(x_rot[..., :half], x_rot[..., half:])
        z = z * rotation
        out = torch.cat([z.real, z.imag], dim=-1)
    else:
        raise AssertionError(layout)
    return torch.cat([out, x_pass], dim=-1)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("theta", [10000.0, 500.0])
def test_rope_matches_complex_formulation(layout, theta):
    torch.manual_seed(0)
    head_dim = 16
    x = torch.randn(2, 3, 40, head_dim)
    positions = torch.arange(40) * 3 + 1  # not just 0..len-1
    cos, sin = rope_tables(positions, head_dim, theta, layout)
    assert cos.shape == sin.shape == (40, head_dim)
    out = apply_rotary(x, cos, sin, layout)
    torch.testing.assert_close(out.double(), rope_reference(x, positions, head_dim, theta, layout), atol=1e-4, rtol=0)
    # A rotation keeps every pair's norm: the total norm is unchanged.
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_layouts_pair_different_dimensions(layout):
    """The two layouts are genuinely different pairings (the reference is not layout-blind)."""
    torch.manual_seed(1)
    x = torch.randn(1, 1, 5, 8)
    positions = torch.arange(5)
    other = "half" if layout == "interleaved" else "interleaved"
    mine = rope_reference(x, positions, 8, 10000.0, layout)
    theirs = rope_reference(x, positions, 8, 10000.0, other)
    assert not torch.allclose(mine[:, :, 1:], theirs[:, :, 1:], atol=1e-3)
    out = apply_rotary(x, *rope_tables(positions, 8, 10000.0, layout), layout)
    assert not torch.allclose(out.double()[:, :, 1:], theirs[:, :, 1:], atol=1e-3)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_per_sequence_positions(layout):
    torch.manual_seed(2)
    x = torch.randn(2, 4, 6, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]])  # [batch, len]
    cos, sin = rope_tables(positions, 8, 10000.0, layout)
    assert cos.shape == (2, 6, 8)
    out = apply_rotary(x, cos, sin, layout)
    torch.testing.assert_close(out.double(), rope_reference(x, positions, 8, 10000.0, layout), atol=1e-5, rtol=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_fraction_half_rotates_only_first_dims(layout):
    torch.manual_seed(3)
    d_model, heads = 64, 4  # head_dim 16 -> rot_dim 8
    pe = RotaryPositionalEncoding(d_model, heads, causal=False, theta=10000.0, fraction=0.5, layout=layout)
    assert pe.rot_dim == 8
    positions = torch.arange(12)
    pos = pe.self_attention(positions, positions)
    assert isinstance(pos, AttentionPositions) and pos.rotary_layout == layout and pos.bias is None
    cos, sin = pos.rotary_q
    assert cos.shape == (12, 8)
    x = torch.randn(2, heads, 12, 16)
    out = apply_rotary(x, cos, sin, pos.rotary_layout)
    assert out.shape == x.shape
    assert torch.equal(out[..., 8:], x[..., 8:])  # unrotated dims pass through unchanged
    torch.testing.assert_close(out.double(), rope_reference(x, positions, 8, 10000.0, layout), atol=1e-5, rtol=0)
    assert not torch.allclose(out[:, :, 1:, :8], x[:, :, 1:, :8], atol=1e-3)  # the first dims do rotate


def test_rope_cross_attention_only_when_asked():
    q_pos, k_pos = torch.arange(3), torch.arange(5)
    assert RotaryPositionalEncoding(32, 4, causal=True).cross_attention(q_pos, k_pos) is None
    pe = RotaryPositionalEncoding(32, 4, causal=True, cross_attention=True)
    pos = pe.cross_attention(q_pos, k_pos)
    assert pos.rotary_q[0].shape == (3, 8) and pos.rotary_k[0].shape == (5, 8)


def rotary_scores(q, k, q_positions, k_positions, rot_dim, layout, theta=10000.0):
    q = apply_rotary(q, *rope_tables(q_positions, rot_dim, theta, layout), layout)
    k = apply_rotary(k, *rope_tables(k_positions, rot_dim, theta, layout), layout)
    return q @ k.transpose(-1, -2)  # [batch, heads, q_len, k_len]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("rot_dim", [16, 8])
def test_rope_scores_depend_only_on_offset(layout, rot_dim):
    torch.manual_seed(4)
    q = torch.randn(2, 4, 7, 16)
    k = torch.randn(2, 4, 9, 16)
    m = torch.randint(0, 30, (7,))
    n = torch.randint(0, 30, (9,))
    base = rotary_scores(q, k, m, n, rot_dim, layout)
    for c in (1, 5, 37, 200):
        shifted = rotary_scores(q, k, m + c, n + c, rot_dim, layout)
        torch.testing.assert_close(shifted, base, atol=2e-4, rtol=1e-4)
    # Shifting only the queries changes the scores: they do carry relative position.
    assert not torch.allclose(rotary_scores(q, k, m + 3, n, rot_dim, layout), base, atol=1e-2)


def split_heads(x, heads):
    batch, length, d = x.shape
    return x.view(batch, length, heads, d // heads).transpose(1, 2)  # [batch, heads, len, head_dim]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_self_attention_equals_sdpa_on_reference_rotation(layout):
    torch.manual_seed(8)
    d, heads = 32, 4
    mha = MultiHeadAttention(d, heads).eval()
    pe = RotaryPositionalEncoding(d, heads, causal=True, fraction=0.5, layout=layout)
    x = torch.randn(2, 6, d)
    positions = torch.arange(6)
    w_q, w_k, w_v = mha.qkv_proj.weight.chunk(3, dim=0)
    b_q, b_k, b_v = mha.qkv_proj.bias.chunk(3, dim=0)
    q = rope_reference(split_heads(x @ w_q.T + b_q, heads), positions, pe.rot_dim, 10000.0, layout).float()
    k = rope_reference(split_heads(x @ w_k.T + b_k, heads), positions, pe.rot_dim, 10000.0, layout).float()
    v = split_heads(x @ w_v.T + b_v, heads)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = expected.transpose(1, 2).reshape(2, 6, d) @ mha.out_proj.weight.T + mha.out_proj.bias
    with torch.no_grad():
        out = mha(x, is_causal=True, attn_positions=pe.self_attention(positions, positions))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
