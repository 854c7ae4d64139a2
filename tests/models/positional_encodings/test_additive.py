"""The additive encodings (models/positional_encodings/additive.py) against their formulas: the sinusoidal
table (Vaswani et al. 2017), the learnable table and its limit, NoPE, SHAPE and CAPE."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import D_MODEL, HEADS, PAD, VOCAB, tiny_model

from decoding.step import CachedDecoder
from models.attention import MultiHeadAttention
from models.positional_encodings import (
    CapePositionalEncoding,
    LearnablePositionalEncoding,
    NoPositionalEncoding,
    ShapePositionalEncoding,
    SinusoidalPositionalEncoding,
    build_positional_encoding,
    sinusoidal_table,
)
from settings.config import ConfigError, PositionalConfig, load_config

CPU = torch.device("cpu")


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


def make_pe(name: str, causal: bool, d_model: int = D_MODEL, num_heads: int = HEADS, **options):
    """Any registered encoding, built the way the config builds it (future encodings included)."""
    cfg = PositionalConfig(name=name, options={"max_positions": 64, **options} if name == "learnable" else options)
    return build_positional_encoding(cfg, d_model, num_heads, causal)


def random_tokens(batch: int, length: int, generator=None) -> torch.Tensor:
    return torch.randint(4, VOCAB, (batch, length), generator=generator)


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


def test_shape_shifts_positions_randomly_in_training() -> None:
    torch.manual_seed(0)
    # inference_shift=0: unshifted at inference (the default K is tested above)
    shape = tiny_model(
        vocab=40,
        layers=1,
        encoder_pe=ShapePositionalEncoding(32, 4, False, 50, inference_shift=0),
        decoder_pe=ShapePositionalEncoding(32, 4, True, 50, inference_shift=0),
    )
    sinus = tiny_model(
        vocab=40,
        layers=1,
        encoder_pe=SinusoidalPositionalEncoding(32, 4, False),
        decoder_pe=SinusoidalPositionalEncoding(32, 4, True),
    )
    sinus.load_state_dict(shape.state_dict())
    src, tgt = torch.randint(4, 40, (3, 6)), torch.randint(4, 40, (3, 5))
    shape.eval(), sinus.eval()
    assert torch.allclose(shape(src, tgt), sinus(src, tgt))  # inference: plain sinusoidal
    shape.train()
    first, second = shape(src, tgt), shape(src, tgt)
    assert not torch.allclose(first, second)  # a new random offset per call (dropout is 0)
    pe = shape.encoder_pe
    shifted = pe.positions(6, 64, True, torch.device("cpu"))  # [batch, len]
    offsets = shifted[:, 0]
    assert shifted.shape == (64, 6) and torch.equal(shifted - offsets[:, None], torch.arange(6).expand(64, 6))
    assert offsets.min() >= 0 and offsets.max() < 50 and offsets.unique().numel() > 1
