"""The score-bias encodings (models/positional_encodings/score_bias.py) against their papers: ALiBi, T5
buckets (and transformers' own), Shaw, KERPLE, FIRE; shift invariance and one bias per stack."""

from __future__ import annotations

import math

import pytest
import torch

from models.positional_encodings import (
    POSITIONAL_ENCODINGS,
    ALiBiPositionalEncoding,
    FireBias,
    KerpleLogBias,
    ScoreBiasEncoding,
    ShawRelativeBias,
    alibi_slopes,
    build_positional_encoding,
    t5_relative_bucket,
)
from settings.config import PositionalConfig


def test_kerple_bias_is_minus_p_log_one_plus_a_distance_with_the_floor():
    pe = KerpleLogBias(16, 4, causal=False)
    with torch.no_grad():
        pe.power.copy_(torch.tensor([1.5, 0.2, -3.0, 0.01]))  # -3 is held at the floor 0.01
        pe.rate.copy_(torch.tensor([0.5, 2.0, 1.0, -1.0]))
    bias = pe.self_attention(torch.arange(4), torch.arange(4)).bias  # [heads, q, k]
    for h, (p, a) in enumerate([(1.5, 0.5), (0.2, 2.0), (0.01, 1.0), (0.01, 0.01)]):
        for i in range(4):
            for j in range(4):
                assert bias[h, i, j].item() == pytest.approx(-p * math.log(1 + a * abs(i - j)), abs=1e-6)
    # The floor holds the value but not the gradient: a parameter below it can come back.
    pe.self_attention(torch.arange(4), torch.arange(4)).bias.sum().backward()
    assert pe.power.grad[2] != 0 and pe.rate.grad[3] != 0


def test_fire_bias_matches_the_formula_and_reads_direction_only_in_the_encoder():
    torch.manual_seed(0)
    for causal in (False, True):
        pe = FireBias(16, 2, causal=causal, hidden=3, threshold=4.0)
        with torch.no_grad():
            pe.log_c.fill_(math.log(0.7))
            for p in pe.mlp.parameters():
                p.normal_()
        w1, b1 = pe.mlp[0].weight.tolist(), pe.mlp[0].bias.tolist()
        w2, b2 = pe.mlp[2].weight.tolist(), pe.mlp[2].bias.tolist()
        q_pos, k_pos = torch.arange(2, 9), torch.arange(9)
        bias = pe.self_attention(q_pos, k_pos).bias  # [heads, 7, 9]

        def psi(x: float) -> float:
            return math.log(0.7 * x + 1)

        for a, i in enumerate(q_pos.tolist()):
            for j in k_pos.tolist():
                x = [psi(abs(i - j)) / psi(max(4.0, i)), float(j > i) if not causal else 0.0]
                hidden = [max(0.0, sum(w * v for w, v in zip(row, x)) + b) for row, b in zip(w1, b1)]
                for h in range(2):
                    expected = sum(w * v for w, v in zip(w2[h], hidden)) + b2[h]
                    assert bias[h, a, j].item() == pytest.approx(expected, abs=1e-5)


def test_fire_is_not_shift_invariant_but_its_cached_rows_match():
    pe = FireBias(16, 2, causal=True, threshold=2.0)
    with torch.no_grad():
        for p in pe.mlp.parameters():
            p.normal_(generator=torch.Generator().manual_seed(2))
    full = pe.self_attention(torch.arange(6), torch.arange(6)).bias
    shifted = pe.self_attention(torch.arange(6) + 20, torch.arange(6) + 20).bias
    assert not torch.allclose(full, shifted)  # the normalizer psi(max(L, i)) moves with the query
    for step in range(6):
        row = pe.self_attention(torch.tensor([step]), torch.arange(step + 1)).bias
        torch.testing.assert_close(row[:, 0], full[:, step, : step + 1])


def test_alibi_slopes_match_the_paper() -> None:
    # Press et al. (2022): for n heads (a power of two) the slopes are 2^(-8/n * i), i = 1..n.
    assert alibi_slopes(8).tolist() == pytest.approx([2 ** -(i + 1) for i in range(8)])
    assert alibi_slopes(4).tolist() == pytest.approx([2 ** -(2 * (i + 1)) for i in range(4)])
    # n = 6: the 4-head slopes, then every other slope of the 8-head sequence (1/2, 1/8).
    assert alibi_slopes(6).tolist() == pytest.approx([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    enc = ALiBiPositionalEncoding(16, 2, causal=False)
    pos = torch.arange(4)
    bias = enc.self_attention(pos, pos).bias  # [heads, q, k]
    slopes = alibi_slopes(2)
    for h in range(2):
        for i in range(4):
            for j in range(4):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j))
    assert enc.cross_attention(pos, pos) is None  # off by default


def test_t5_buckets_match_a_hand_computed_table() -> None:
    # relative = key - query. Bidirectional, 32 buckets (16 per side), max_exact 8, max_distance 128:
    # small distances map to themselves; 8 -> 8 + floor(log(8/8)/log(16) * 8) = 8; 32 -> 8 + 4 = 12;
    # 64 -> 8 + 6 = 14; >= 128 -> the last bucket 15; keys after the query add 16.
    rel = torch.tensor([0, -1, -2, -7, -8, -32, -64, -128, -1000, 1, 7, 32, 1000])
    want = [0, 1, 2, 7, 8, 12, 14, 15, 15, 17, 23, 28, 31]
    assert t5_relative_bucket(rel, True, 32, 128).tolist() == want
    # Unidirectional (decoder): 32 buckets, max_exact 16; future keys fall in bucket 0;
    # 32 -> 16 + floor(log(2)/log(8) * 16) = 21; 64 -> 16 + floor(2/3 * 16) = 26; >= 128 -> 31.
    rel = torch.tensor([0, 3, -1, -15, -16, -32, -64, -127, -500])
    assert t5_relative_bucket(rel, False, 32, 128).tolist() == [0, 0, 1, 15, 16, 21, 26, 31, 31]


def test_t5_buckets_agree_with_transformers_t5() -> None:
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-300, 301)[None, :]
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (16, 64)):
            ours = t5_relative_bucket(rel, bidirectional, buckets, distance)
            theirs = T5Attention._relative_position_bucket(rel, bidirectional, buckets, distance)
            assert torch.equal(ours, theirs)


def test_shaw_bias_clips_relative_distance() -> None:
    enc = ShawRelativeBias(16, 2, causal=False, clip_distance=2)
    torch.nn.init.normal_(enc.bias_table.weight)
    pos = torch.arange(8)
    bias = enc.self_attention(pos, pos).bias  # [heads, q, k]
    table = enc.bias_table.weight  # [2k + 1, heads]
    for i in range(8):
        for j in range(8):
            idx = max(-2, min(2, j - i)) + 2
            assert torch.allclose(bias[:, i, j], table[idx])


# Every score-bias encoding; FIRE's bias also depends on where the query is (its normalizer), so
# only the others are invariant to shifting all positions (FIRE: test_fire_is_not_shift_invariant_but_...).
RELATIVE = sorted(n for n, cls in POSITIONAL_ENCODINGS.items() if issubclass(cls, ScoreBiasEncoding))


SHIFT_INVARIANT = [n for n in RELATIVE if n != "fire"]


@pytest.mark.parametrize("name", SHIFT_INVARIANT)
@pytest.mark.parametrize("causal", [False, True])
def test_relative_bias_is_invariant_to_shifting_all_positions(name: str, causal: bool) -> None:
    torch.manual_seed(0)
    pe = build_positional_encoding(PositionalConfig(name=name, options={"cross_attention": True}), 32, 4, causal)
    for p in pe.parameters():
        torch.nn.init.normal_(p)
    q, k = torch.arange(5), torch.arange(9)
    base_self = pe.self_attention(q, k).bias
    base_cross = pe.cross_attention(q, k).bias
    for shift in (1, 7, 300):
        assert torch.allclose(pe.self_attention(q + shift, k + shift).bias, base_self)
        assert torch.allclose(pe.cross_attention(q + shift, k + shift).bias, base_cross)
    # ...but not to shifting queries alone
    assert not torch.allclose(pe.self_attention(q + 3, k).bias, base_self)


def test_relative_families_share_one_bias_per_stack_and_offset_decoding() -> None:
    """The bias for a cached decoding step equals the matching row of the full-sequence bias."""
    for name in RELATIVE:
        pe = build_positional_encoding(PositionalConfig(name=name), 32, 4, causal=True)
        assert isinstance(pe, ScoreBiasEncoding)
        for p in pe.parameters():
            torch.nn.init.normal_(p)
        full = pe.self_attention(torch.arange(6), torch.arange(6)).bias  # [heads, 6, 6]
        for step in range(6):
            row = pe.self_attention(torch.tensor([step]), torch.arange(step + 1)).bias  # [heads, 1, step + 1]
            assert torch.allclose(row[:, 0], full[:, step, : step + 1])
