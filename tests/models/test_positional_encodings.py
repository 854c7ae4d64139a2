"""Positional encodings: reference matches, properties, and every registered encoding end to end.

The hooks they plug into are described in docs/DESIGN.md ("Positional encodings"). Over the
~400-line guide on purpose: one file holds the reference test of every encoding, side by side
like the encodings themselves.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import BOS, D_MODEL, HEADS, PAD, VOCAB, encoding_cases, tiny_model

from decoding.step import CachedDecoder
from models.attention import MultiHeadAttention
from models.positional_encodings import (
    POSITIONAL_ENCODINGS,
    AttentionPositions,
    LearnablePositionalEncoding,
    NoPositionalEncoding,
    RotaryPositionalEncoding,
    ShapePositionalEncoding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    build_positional_encoding,
    rope_tables,
    sinusoidal_table,
)
from models.transformer import Seq2SeqTransformer
from utils.config import ConfigError, PositionalConfig, load_config


def make_pe(name: str, causal: bool, d_model: int = D_MODEL, num_heads: int = HEADS, **options):
    """Any registered encoding, built the way the config builds it (future encodings included)."""
    cfg = PositionalConfig(name=name, options={"max_positions": 64, **options} if name == "learnable" else options)
    return build_positional_encoding(cfg, d_model, num_heads, causal)


def random_tokens(batch: int, length: int, generator=None) -> torch.Tensor:
    return torch.randint(4, VOCAB, (batch, length), generator=generator)


# ---------------------------------------------------------------------------- sinusoidal


def paper_sinusoid(position: int, d: int) -> list[float]:
    """Vaswani et al. (2017), section 3.5, in float64 with Python's math module."""
    row = []
    for j in range(d):
        i = j // 2  # dimension j = 2i (sin) or 2i + 1 (cos)
        angle = position / 10000.0 ** (2 * i / d)
        row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
    return row


@pytest.mark.parametrize("d", [2, 7, 8, 32, 512])
def test_sinusoidal_table_matches_paper_formula(d):
    positions = torch.arange(512)  # even and odd positions
    table = sinusoidal_table(positions, d)
    assert table.shape == (512, d)
    expected = torch.tensor([paper_sinusoid(p, d) for p in range(512)], dtype=torch.float64)
    # float32 angles: the error grows with the position (~3e-5 at 511).
    torch.testing.assert_close(table.double(), expected, atol=5e-5, rtol=0)
    # Exact spot checks: position 0 is (0, 1, 0, 1, ...); dimension 0 is sin(p), dimension 1 cos(p).
    assert table[0, 0::2].abs().max() == 0 and torch.all(table[0, 1::2] == 1)
    for p in (1, 2, 3, 17, 100):
        assert table[p, 0].item() == pytest.approx(math.sin(p), abs=1e-5)
        if d > 1:
            assert table[p, 1].item() == pytest.approx(math.cos(p), abs=1e-5)


def test_sinusoidal_table_any_position_shape_and_module_adds_it():
    positions = torch.tensor([[5, 6, 7], [0, 1, 2]])  # [batch, len]
    table = sinusoidal_table(positions, 8)
    assert table.shape == (2, 3, 8)
    torch.testing.assert_close(
        table[0, 2].double(), torch.tensor(paper_sinusoid(7, 8), dtype=torch.float64), atol=1e-6, rtol=0
    )
    pe = SinusoidalPositionalEncoding(8, 2, causal=False)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(pe.add_to_embeddings(x, positions), x + table)


# ---------------------------------------------------------------------------- RoPE


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


# ---------------------------------------------------------------------------- learnable


def test_learnable_too_long_input_raises_with_max_positions():
    pe = LearnablePositionalEncoding(D_MODEL, HEADS, causal=False, max_positions=8)
    x = torch.randn(2, 9, D_MODEL)
    with pytest.raises(ValueError, match="max_positions"):
        pe.positions(9, 2, False, torch.device("cpu"))
    out = pe.add_to_embeddings(x[:, :8], pe.positions(8, 2, False, torch.device("cpu")))
    torch.testing.assert_close(out, x[:, :8] + pe.table.weight[:8])


def test_learnable_limits_in_model_encoder_and_decoder():
    model = tiny_model(
        encoder_pe=LearnablePositionalEncoding(D_MODEL, HEADS, False, max_positions=8),
        decoder_pe=LearnablePositionalEncoding(D_MODEL, HEADS, True, max_positions=6),
    )
    with pytest.raises(ValueError, match="max_positions"):
        model.encode(random_tokens(2, 9))
    enc = model.encode(random_tokens(2, 8))  # exactly max_positions works
    assert enc.memory.shape == (2, 8, D_MODEL)
    assert model.decode(random_tokens(2, 6), enc).shape == (2, 6, VOCAB)
    with pytest.raises(ValueError, match="max_positions"):
        model.decode(random_tokens(2, 7), enc)
    decoder = CachedDecoder(model)
    cache = decoder.new_cache()
    with pytest.raises(RuntimeError, match="torch.no_grad"):  # the cache is for inference
        decoder.decode(random_tokens(2, 6), enc, cache)
    cache = decoder.new_cache()
    with torch.no_grad():
        decoder.decode(random_tokens(2, 6), enc, cache)
        with pytest.raises(ValueError, match="max_positions"):  # position 6 through the cached path
            decoder.decode_step(random_tokens(2, 1), enc, cache, offset=6)


# ---------------------------------------------------------------------------- NoPE


def test_nope_encoder_is_permutation_equivariant():
    model = tiny_model(
        encoder_pe=NoPositionalEncoding(D_MODEL, HEADS, False), decoder_pe=NoPositionalEncoding(D_MODEL, HEADS, True)
    )
    g = torch.Generator().manual_seed(5)
    src = random_tokens(3, 9, g)
    src[0, 6:] = PAD  # padding moves with its token; the key mask follows it
    perm = torch.randperm(9, generator=g)
    assert not torch.equal(perm, torch.arange(9))
    with torch.no_grad():
        memory = model.encode(src).memory
        permuted = model.encode(src[:, perm]).memory
    real = src[:, perm].ne(PAD)
    torch.testing.assert_close(permuted[real], memory[:, perm][real], atol=1e-5, rtol=1e-5)

    # Contrast: with sinusoidal positions the same check fails, so it can detect position information.
    sin_model = tiny_model(
        encoder_pe=SinusoidalPositionalEncoding(D_MODEL, HEADS, False),
        decoder_pe=SinusoidalPositionalEncoding(D_MODEL, HEADS, True),
    )
    with torch.no_grad():
        assert not torch.allclose(
            sin_model.encode(src[:, perm]).memory[real], sin_model.encode(src).memory[:, perm][real], atol=1e-3
        )


def split_heads(x, heads):
    batch, length, d = x.shape
    return x.view(batch, length, heads, d // heads).transpose(1, 2)  # [batch, heads, len, head_dim]


def test_nope_self_attention_equals_sdpa_by_hand():
    torch.manual_seed(6)
    d, heads = 32, 4
    mha = MultiHeadAttention(d, heads).eval()
    x = torch.randn(2, 7, d)
    key_mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    key_mask[1, ..., 5:] = False
    w_q, w_k, w_v = mha.qkv_proj.weight.chunk(3, dim=0)
    b_q, b_k, b_v = mha.qkv_proj.bias.chunk(3, dim=0)
    q = split_heads(x @ w_q.T + b_q, heads)
    k = split_heads(x @ w_k.T + b_k, heads)
    v = split_heads(x @ w_v.T + b_v, heads)

    for mask, causal in ((key_mask, False), (None, True)):
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        expected = expected.transpose(1, 2).reshape(2, 7, d) @ mha.out_proj.weight.T + mha.out_proj.bias
        with torch.no_grad():
            out = mha(x, attn_mask=mask, is_causal=causal, attn_positions=None)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)

    # And the hand-written softmax(qk^T / sqrt(d_head)) v agrees with both (the key mask case).
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d // heads)).masked_fill(~key_mask, float("-inf"))
    manual = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 7, d) @ mha.out_proj.weight.T + mha.out_proj.bias
    with torch.no_grad():
        torch.testing.assert_close(mha(x, attn_mask=key_mask), manual, atol=1e-5, rtol=1e-5)
        weights = mha.attention_weights(x, attn_mask=key_mask)
    torch.testing.assert_close(weights, scores.softmax(-1), atol=1e-6, rtol=1e-5)
    assert weights[1, :, :, 5:].abs().max() == 0  # padded keys get no weight


def test_nope_cross_attention_equals_sdpa_by_hand():
    torch.manual_seed(7)
    d, heads = 32, 4
    mha = MultiHeadAttention(d, heads, cross=True).eval()
    x, memory = torch.randn(2, 4, d), torch.randn(2, 6, d)
    key_mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])[:, None, None, :]
    q = split_heads(x @ mha.q_proj.weight.T + mha.q_proj.bias, heads)
    w_k, w_v = mha.kv_proj.weight.chunk(2, dim=0)
    b_k, b_v = mha.kv_proj.bias.chunk(2, dim=0)
    k, v = split_heads(memory @ w_k.T + b_k, heads), split_heads(memory @ w_v.T + b_v, heads)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
    expected = expected.transpose(1, 2).reshape(2, 4, d) @ mha.out_proj.weight.T + mha.out_proj.bias
    with torch.no_grad():
        torch.testing.assert_close(mha(x, memory, attn_mask=key_mask), expected, atol=1e-5, rtol=1e-5)


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


# ---------------------------------------------------------------------------- SHAPE


def record_added_embeddings(pe, log: list) -> None:
    """Wrap `pe.add_to_embeddings` to log (positions, what it added) on each call."""
    original = pe.add_to_embeddings

    def wrapped(x, positions):
        out = original(x, positions)
        log.append((positions, out - x))
        return out

    pe.add_to_embeddings = wrapped


def test_shape_training_shifts_cover_exactly_0_to_k_minus_1():
    """Kiyono et al. (2021) / butsugiri/shape: k ~ U{0..K-1} per sequence (torch.randint(0, K)):
    K itself is never drawn. The shifted positions reach the sinusoidal table, with independent
    shifts for source and target."""
    K, batch = 3, 2000
    model = tiny_model(
        seed=12, encoder_pe=make_pe("shape", False, max_shift=K), decoder_pe=make_pe("shape", True, max_shift=K)
    )
    enc_log, dec_log = [], []
    record_added_embeddings(model.encoder_pe, enc_log)
    record_added_embeddings(model.decoder_pe, dec_log)
    g = torch.Generator().manual_seed(12)
    model.train()
    torch.manual_seed(12)
    with torch.no_grad():
        model(random_tokens(batch, 5, g), random_tokens(batch, 4, g))
    shifts = []
    for log, length in ((enc_log, 5), (dec_log, 4)):
        ((positions, added),) = log
        assert positions.shape == (batch, length)
        shift = positions[:, :1]  # [batch, 1]
        assert torch.equal(positions, torch.arange(length) + shift)  # one shift per sequence
        assert set(shift.unique().tolist()) == set(range(K))  # 0 and K-1 drawn, K never
        torch.testing.assert_close(added, sinusoidal_table(positions, D_MODEL), atol=1e-5, rtol=0)
        shifts.append(shift)
    assert not torch.equal(shifts[0], shifts[1])  # source and target drawn independently
    # The hook on its own, over many draws.
    drawn = model.encoder_pe.positions(4, batch, True, torch.device("cpu"))
    shift = drawn[:, :1]
    assert drawn.shape == (batch, 4) and torch.equal(drawn, torch.arange(4) + shift)
    assert set(shift.unique().tolist()) == set(range(K))


@pytest.mark.parametrize("inference_shift, expected", [(None, 5), (0, 0), (7, 7)])
def test_shape_inference_adds_table_at_positions_plus_fixed_shift(inference_shift, expected):
    """Eval mode: encoder and decoder add sinusoidal_table(positions + s), s = K by default (the
    authors' code), 0 or an explicit value; identical for a full decode and cached steps, whose
    self-attention keys (cached ones included) carry the same shift."""
    options = dict(max_shift=5, inference_shift=inference_shift)
    model = tiny_model(
        seed=13, encoder_pe=make_pe("shape", False, **options), decoder_pe=make_pe("shape", True, **options)
    )
    enc_log, dec_log, key_log = [], [], []
    record_added_embeddings(model.encoder_pe, enc_log)
    record_added_embeddings(model.decoder_pe, dec_log)
    self_attention = model.decoder_pe.self_attention
    model.decoder_pe.self_attention = lambda q, k: key_log.append((q, k)) or self_attention(q, k)
    g = torch.Generator().manual_seed(13)
    src, tgt = random_tokens(2, 6, g), random_tokens(2, 5, g)
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc)
        decoder = CachedDecoder(model)
        cache = decoder.new_cache()
        steps = [decoder.decode_step(tgt[:, t : t + 1], enc, cache, offset=t) for t in range(5)]
    ((positions, added),) = enc_log
    assert torch.equal(positions, torch.arange(6) + expected)
    torch.testing.assert_close(
        added, sinusoidal_table(torch.arange(6) + expected, D_MODEL).expand(2, 6, D_MODEL), atol=1e-5, rtol=0
    )
    (positions, added), *step_logs = dec_log
    torch.testing.assert_close(
        added, sinusoidal_table(torch.arange(5) + expected, D_MODEL).expand(2, 5, D_MODEL), atol=1e-5, rtol=0
    )
    assert torch.equal(key_log[0][1], torch.arange(5) + expected)
    for t, ((positions, added), (q, k), logits) in enumerate(zip(step_logs, key_log[1:], steps)):
        assert torch.equal(positions, torch.tensor([t + expected])) and torch.equal(q, positions)
        assert torch.equal(k, torch.arange(t + 1) + expected)  # cached keys share the shift
        torch.testing.assert_close(added, sinusoidal_table(positions, D_MODEL).expand(2, 1, D_MODEL), atol=1e-5, rtol=0)
        torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=0)
    # With the same weights, plain sinusoidal gives the same output exactly when the shift is 0.
    sinus = tiny_model(
        seed=13,
        encoder_pe=SinusoidalPositionalEncoding(D_MODEL, HEADS, False),
        decoder_pe=SinusoidalPositionalEncoding(D_MODEL, HEADS, True),
    )
    sinus.load_state_dict(model.state_dict())
    with torch.no_grad():
        same = torch.allclose(sinus.decode(tgt, sinus.encode(src)), full, atol=1e-5)
    assert same == (expected == 0)


def test_shape_config_keys_and_validation():
    def load(**positional):
        return load_config(
            raw={"model": {"d_model": 32, "num_heads": 4, "positional": {"name": "shape", **positional}}}
        )

    assert load().model.positional.options == {"max_shift": 100, "inference_shift": None}
    for value, expected in ((None, 100), (0, 0), (3, 3)):
        pe = build_positional_encoding(load(inference_shift=value).model.positional, 32, 4, False)
        assert isinstance(pe, ShapePositionalEncoding) and pe.max_shift == 100 and pe.inference_shift == expected
        assert torch.equal(pe.positions(3, 2, False, torch.device("cpu")), torch.arange(3) + expected)
    assert load(max_shift=1).model.positional.options["max_shift"] == 1  # k always 0 in training
    for key, value in (("max_shift", 0), ("max_shift", -2), ("inference_shift", -1)):
        with pytest.raises(ConfigError, match=f"model.positional.{key}"):
            load(**{key: value})
    with pytest.raises(ConfigError, match="model.positional.inference_shift"):
        load(inference_shift="far")
    with pytest.raises(ValueError, match="max_shift"):
        ShapePositionalEncoding(D_MODEL, HEADS, False, max_shift=0)
    with pytest.raises(ValueError, match="inference_shift"):
        ShapePositionalEncoding(D_MODEL, HEADS, False, max_shift=4, inference_shift=-1)


# ---------------------------------------------------------------------------- explicit positions / cache


@pytest.mark.parametrize("name, options", encoding_cases())
def test_decode_with_offset_after_cached_prefix_equals_full_decode(name, options):
    model = tiny_model(seed=9, encoder_pe=make_pe(name, False, **options), decoder_pe=make_pe(name, True, **options))
    g = torch.Generator().manual_seed(9)
    src = random_tokens(2, 8, g)
    src[1, 5:] = PAD
    tgt = torch.cat([torch.full((2, 1), BOS), random_tokens(2, 9, g)], dim=1)  # [2, 10]
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc)
        assert full.shape == (2, 10, VOCAB)
        decoder = CachedDecoder(model)
        for t in (1, 4, 7, 9):
            cache = decoder.new_cache()
            prefix = decoder.decode(tgt[:, :t], enc, cache)  # positions 0..t-1
            rest = decoder.decode(tgt[:, t:], enc, cache, offset=t)  # positions t.., prefix from the cache
            torch.testing.assert_close(prefix, full[:, :t], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(rest, full[:, t:], atol=1e-5, rtol=1e-5)
            assert cache[0]["self"].keys.shape[2] == 10  # the cache holds every position once


@pytest.mark.parametrize("name", [n for n in sorted(POSITIONAL_ENCODINGS) if n != "none"])
def test_decoder_offset_matters(name):
    """Cached steps at their offsets equal the full decode — an offset ignored (every step at
    position 0) would change these logits for every encoding tested here — and a cache continued
    at an offset other than its length is refused, naming the right one."""
    model = tiny_model(seed=10, encoder_pe=make_pe(name, False), decoder_pe=make_pe(name, True))
    for pname, p in model.named_parameters():
        if "_pe." in pname:  # learned bias tables start at zero (no signal yet): give them one
            torch.nn.init.normal_(p, generator=torch.Generator().manual_seed(10))
    g = torch.Generator().manual_seed(10)
    src, tgt = random_tokens(2, 6, g), random_tokens(2, 6, g)
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc)
        decoder = CachedDecoder(model)
        right = decoder.new_cache()
        for step in range(6):
            torch.testing.assert_close(
                decoder.decode_step(tgt[:, step : step + 1], enc, right, offset=step),
                full[:, step],
                atol=1e-5,
                rtol=1e-5,
            )
        with pytest.raises(ValueError, match="pass offset=6"):
            decoder.decode_step(tgt[:, :1], enc, right, offset=0)


# ---------------------------------------------------------------------------- every registered encoding


@pytest.mark.parametrize("name", sorted(POSITIONAL_ENCODINGS))
def test_every_registered_encoding_forward_backward(name):
    assert {"none", "sinusoidal", "learnable", "rope"} <= set(POSITIONAL_ENCODINGS)
    enc_pe, dec_pe = make_pe(name, False), make_pe(name, True)
    assert isinstance(enc_pe, POSITIONAL_ENCODINGS[name]) and enc_pe.registry_name == name
    torch.manual_seed(11)
    model = Seq2SeqTransformer(
        VOCAB,
        VOCAB,
        PAD,
        enc_pe,
        dec_pe,
        d_model=D_MODEL,
        num_heads=HEADS,
        num_encoder_layers=2,
        num_decoder_layers=2,
        ffn_dim=64,
        dropout=0.1,
    )
    model.train()  # training path (dropout, position_shift in training mode)
    g = torch.Generator().manual_seed(11)
    src, tgt = random_tokens(3, 7, g), random_tokens(3, 6, g)
    src[2, 4:] = PAD
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt[:, :-1]], dim=1)
    tgt_in[2, 4:] = PAD
    logits = model(src, tgt_in)
    assert logits.shape == (3, 6, VOCAB)
    assert torch.isfinite(logits).all()
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1), ignore_index=PAD)
    loss.backward()
    assert torch.isfinite(loss)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert params
    for param_name, p in params:
        assert p.grad is not None, f"{name}: no gradient for {param_name}"
        assert torch.isfinite(p.grad).all(), f"{name}: non-finite gradient for {param_name}"
    assert any(p.grad.abs().sum() > 0 for _, p in params)


def test_build_positional_encoding_rejects_unknown_name():
    with pytest.raises(ValueError, match="unknown positional encoding"):
        build_positional_encoding(PositionalConfig(name="no-such-encoding"), D_MODEL, HEADS, False)


def test_separate_embeddings_are_initialised_in_a_fixed_order(monkeypatch) -> None:
    """With share_embeddings false, the source table draws its initial values before the target's,
    every time: the order once followed the objects' addresses (a set), so a seed did not fix it."""
    from models import build_model

    cfg = load_config(
        "configs/demo/sinusoidal.yaml",
        ["model.share_embeddings=false", "model.d_model=16", "model.num_heads=2", "model.ffn_dim=16"],
    ).model
    order = []
    real = torch.nn.init.normal_
    monkeypatch.setattr(torch.nn.init, "normal_", lambda t, *a, **k: order.append(t.shape[0]) or real(t, *a, **k))
    for _ in range(20):
        order.clear()
        model = build_model(cfg, 30, 40, PAD)
        assert model.src_embed is not model.tgt_embed and order[-2:] == [30, 40]  # (after their constructors)
