"""Reference tests for the encodings built for length: xPos, KERPLE, FIRE, CAPE, randomized
positions and RoPE's inference-time scalings (linear, NTK, YaRN).

Each is checked against an independent computation of the published formula (loops and complex
numbers here, not the tensor code under test); the registry-wide properties (cached = full
decoding, explicit positions, offsets) run on every registered encoding in test_step.py and test_search.py,
test_cache.py and test_positional_encodings.py.
"""

from __future__ import annotations

import cmath
import math

import pytest
import torch
from helpers import BOS, D_MODEL, HEADS, PAD, VOCAB, full_and_cached, tiny_model

from artifacts.checkpoint import CheckpointError
from artifacts.loading import check_training_lengths
from models.positional_encodings import (
    POSITIONAL_ENCODINGS,
    CapePositionalEncoding,
    FireBias,
    KerpleLogBias,
    LearnablePositionalEncoding,
    RotaryPositionalEncoding,
    ShapePositionalEncoding,
    SinusoidalPositionalEncoding,
    XposPositionalEncoding,
    apply_rotary,
    build_positional_encoding,
    sinusoidal_table,
)
from models.positional_encodings.randomized import inference_cover
from utils.config import ConfigError, PositionalConfig, load_config

CPU = torch.device("cpu")


def test_the_length_encodings_are_registered_beside_the_eight():
    assert {
        "sinusoidal",
        "learnable",
        "rope",
        "alibi",
        "t5_bias",
        "shaw",
        "none",
        "shape",
        "xpos",
        "kerple",
        "fire",
        "cape",
    } <= set(POSITIONAL_ENCODINGS)


# ---------------------------------------------------------------------------- xPos


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


# ---------------------------------------------------------------------------- KERPLE


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


# ---------------------------------------------------------------------------- FIRE


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


# ---------------------------------------------------------------------------- CAPE


def test_cape_global_shift_only_moves_every_position_of_a_sequence_alike_and_equals_shape():
    cape = CapePositionalEncoding(
        D_MODEL, HEADS, causal=False, max_global_shift=7.0, max_local_shift=0.0, max_global_scaling=1.0
    )
    torch.manual_seed(3)
    positions = cape.positions(6, 500, training=True, device=CPU)  # [500, 6]
    offsets = positions - torch.arange(6)
    assert torch.allclose(offsets, offsets[:, :1].expand(500, 6), atol=1e-5)  # one offset per sequence
    assert offsets.abs().max() <= 7.0 and offsets.min() < -5 and offsets.max() > 5  # U[-7, 7]
    # SHAPE with the same (integer) offset adds exactly the same vectors.
    shape = ShapePositionalEncoding(D_MODEL, HEADS, causal=False, max_shift=10)
    x = torch.randn(3, 6, D_MODEL)
    integer = torch.tensor([[0], [3], [9]])
    torch.testing.assert_close(
        cape.add_to_embeddings(x, torch.arange(6) + integer.float()),
        shape.add_to_embeddings(x, torch.arange(6) + integer),
    )
    torch.testing.assert_close(
        cape.add_to_embeddings(x, torch.arange(6) + integer.float()),
        x + sinusoidal_table(torch.arange(6) + integer, D_MODEL),
    )


def test_cape_local_shifts_and_scaling_stay_in_their_ranges_and_inference_is_plain():
    cape = CapePositionalEncoding(
        D_MODEL, HEADS, causal=True, max_global_shift=0.0, max_local_shift=0.5, max_global_scaling=1.5
    )
    torch.manual_seed(4)
    positions = cape.positions(10, 400, training=True, device=CPU)
    jitter = cape.positions(10, 400, training=True, device=CPU)
    assert not torch.allclose(positions, jitter)
    ratio = positions[:, -1] / 9.0  # last position 9 * lambda + lambda * eps
    assert ratio.min() >= (9 - 0.5) / 9 / 1.5 - 1e-6 and ratio.max() <= (9 + 0.5) / 9 * 1.5 + 1e-6
    local = CapePositionalEncoding(
        D_MODEL, HEADS, causal=True, max_global_shift=0.0, max_local_shift=0.5, max_global_scaling=1.0
    ).positions(10, 400, training=True, device=CPU)
    assert (local - torch.arange(10)).abs().max() <= 0.5 and (local - torch.arange(10)).std() > 0.1
    assert torch.equal(cape.positions(10, 4, training=False, device=CPU), torch.arange(10, dtype=torch.float32))
    # Eval mode: CAPE is plain sinusoidal.
    model = tiny_model("cape", seed=5)
    sinus = tiny_model("sinusoidal", seed=5)
    sinus.load_state_dict(model.state_dict())
    src, tgt = torch.randint(4, VOCAB, (2, 7)), torch.randint(4, VOCAB, (2, 5))
    torch.testing.assert_close(model(src, tgt), sinus(src, tgt))


def test_cape_options_are_checked():
    def load(**options):
        return load_config(raw={"model": {"d_model": 32, "num_heads": 4, "positional": {"name": "cape", **options}}})

    assert load().model.positional.options == {
        "max_global_shift": 5.0,
        "max_local_shift": 0.5,
        "max_global_scaling": 1.03,
    }
    for key, value in (("max_global_shift", -1.0), ("max_local_shift", -0.1), ("max_global_scaling", 0.9)):
        with pytest.raises(ConfigError, match=f"model.positional.{key}"):
            load(**{key: value})


# ---------------------------------------------------------------------------- randomized positions


@pytest.mark.parametrize("name", ["sinusoidal", "learnable", "rope"])
def test_randomized_training_positions_are_sorted_distinct_subsets_of_the_range(name):
    options = {"randomized": True, "max_position": 64, **({"max_positions": 64} if name == "learnable" else {})}
    pe = build_positional_encoding(PositionalConfig(name=name, options=options), D_MODEL, HEADS, False)
    torch.manual_seed(6)
    positions = pe.positions(10, 300, training=True, device=CPU)  # [300, 10]
    assert positions.shape == (300, 10) and positions.dtype == torch.long
    assert (positions.diff(dim=-1) > 0).all()  # sorted, distinct
    assert positions.min() >= 0 and positions.max() <= 63
    assert positions[:, -1].float().mean() > 40  # far beyond 9: the whole range is used
    assert positions.unique(dim=0).size(0) > 290  # a fresh draw per sequence
    with pytest.raises(ValueError, match="max_position"):
        pe.positions(65, 2, training=True, device=CPU)
    # Each row draws its own length's positions (a padded row is not the smallest of a longer draw);
    # its padding follows at steps of 1.
    lengths = torch.tensor([10, 3] * 150)
    padded = pe.positions(10, 300, training=True, device=CPU, lengths=lengths)
    short = padded[1::2]
    assert (short[:, :3].diff(dim=-1) > 0).all() and short[:, 2].float().mean() > 40  # max of 3 of 64: ~48
    assert torch.equal(short[:, 3:], (short[:, 2:3] + torch.arange(1, 8)).clamp(max=63))
    off = build_positional_encoding(PositionalConfig(name=name), D_MODEL, HEADS, False)
    assert torch.equal(off.positions(10, 3, training=True, device=CPU), torch.arange(10))


def test_randomized_inference_is_one_seeded_draw_per_sequence_covering_the_output():
    enc = SinusoidalPositionalEncoding(D_MODEL, HEADS, causal=False, randomized=True, max_position=200)
    dec = SinusoidalPositionalEncoding(D_MODEL, HEADS, causal=True, randomized=True, max_position=200)
    lengths = torch.tensor([5, 9, 5])
    a = enc.positions(9, 3, training=False, device=CPU, source_lengths=lengths)
    assert torch.equal(a[0], a[2])  # the draw depends on the sequence, not on its row
    alone = enc.positions(5, 1, training=False, device=CPU, source_lengths=lengths[:1])
    assert torch.equal(a[0, :5], alone[0])  # nor on the batch's padding
    assert (a[:, :5].diff(dim=-1) > 0).all() and a.max() < 200
    again = SinusoidalPositionalEncoding(D_MODEL, HEADS, causal=False, randomized=True, max_position=200)
    assert torch.equal(again.positions(9, 3, training=False, device=CPU, source_lengths=lengths), a)  # reproducible
    # The decoder's draw covers 1.5 x source + 11 positions: its prefixes are what cached steps see.
    assert inference_cover(torch.tensor([5]), decoder=True).item() == 18
    full = dec.positions(18, 1, training=False, device=CPU, source_lengths=lengths[:1])
    for count in (1, 7, 18):
        assert torch.equal(
            dec.positions(count, 1, training=False, device=CPU, source_lengths=lengths[:1]), full[:, :count]
        )
    assert (full.diff(dim=-1) > 0).all()
    past = dec.positions(21, 1, training=False, device=CPU, source_lengths=lengths[:1])
    assert torch.equal(past[0, 18:], full[0, -1] + torch.arange(1, 4))  # steps of 1 past the cover


def test_randomized_learnable_needs_a_table_as_large_as_the_range():
    def load(**options):
        return load_config(
            raw={
                "model": {
                    "d_model": 32,
                    "num_heads": 4,
                    "positional": {"name": "learnable", "randomized": True, **options},
                }
            }
        )

    with pytest.raises(ConfigError, match="max_positions.*max_position"):
        load(max_positions=512, max_position=1024)
    assert load(max_positions=1024, max_position=1024).model.positional.options["randomized"] is True
    pe = LearnablePositionalEncoding(D_MODEL, HEADS, False, max_positions=64, randomized=True, max_position=64)
    assert pe.positions(9, 2, training=False, device=CPU, source_lengths=torch.tensor([40, 3])).max() <= 63


# ---------------------------------------------------------------------------- RoPE scaling at inference


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
    from utils.key_roles import may_change

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


def test_training_length_travels_in_the_state_dict_and_old_checkpoints_load():
    model = tiny_model("rope", seed=8)
    model.encoder_pe.training_length.fill_(13)
    state = model.state_dict()
    assert int(state["encoder_pe.training_length"]) == 13
    again = tiny_model("rope", seed=9)
    again.load_state_dict(state)
    assert int(again.encoder_pe.training_length) == 13
    old = {k: v for k, v in state.items() if not k.endswith("training_length")}  # written before 2026-11-26
    again.load_state_dict(old)  # strict: still loads, the length unknown
    assert int(again.encoder_pe.training_length) == 0


# ---------------------------------------------------------------------------- the study's configs


def test_every_registered_encoding_has_a_length_config_and_a_joined_pairs_config():
    """configs/length/<name>.yaml and <name>_concat.yaml for every registered encoding (future
    ones included); each _concat config is its single-sentence config plus the one joined-pairs
    setting shared by all of them."""
    from pathlib import Path

    from utils.config import flatten, to_dict

    folder = Path(__file__).resolve().parents[2] / "configs" / "length"
    settings = set()
    for name in sorted(POSITIONAL_ENCODINGS):
        single = load_config(folder / f"{name}.yaml")
        joined = load_config(folder / f"{name}_concat.yaml")
        assert single.model.positional.name == joined.model.positional.name == name
        assert single.data.train_concat.prob == 0
        differs = {k for k, v in flatten(to_dict(joined)).items() if flatten(to_dict(single))[k] != v}
        assert differs <= {"name", "data.train_concat.prob", "data.train_concat.max_k", "training.max_steps"}, differs
        assert joined.data.train_concat.prob > 0 and joined.name == f"length/{name}_concat"
        settings.add((joined.data.train_concat.prob, joined.data.train_concat.max_k, joined.training.max_steps))
    assert len(settings) == 1  # one setting for every encoding
    assert 16 in load_config(folder / "base.yaml").evaluation.concat  # k >= 6: beyond every joined example


def test_fire_mlp_keeps_its_own_initialisation_in_the_model():
    """The model zeroes its layers' biases at init; an encoding's MLP (FIRE) keeps nn.Linear's own."""
    model = tiny_model("fire", seed=3)
    for mlp in (model.encoder_pe.mlp, model.decoder_pe.mlp):
        assert mlp[0].bias.abs().sum() > 0 and mlp[2].bias.abs().sum() > 0
