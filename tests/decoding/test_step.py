"""The cached decoding step (decoding/step.py) equals the model's plain forward (models/transformer.py),
with beams sharing a memory row, reorders and padding."""

from __future__ import annotations

import pytest
import torch
from helpers import (
    BOS,
    D_MODEL,
    HEADS,
    PAD,
    VOCAB,
    bos_prefixes,
    encoding_cases,
    full_and_cached,
    mixed_batch,
    tiny_model,
    trim,
)

from decoding.step import CachedDecoder
from models.positional_encodings import build_positional_encoding
from models.transformer import Seq2SeqTransformer
from settings.config import PositionalConfig

# ---------------------------------------------------------------------------- cached decoding


@pytest.mark.parametrize("name, options", encoding_cases())
def test_cached_step_by_step_equals_full_decode(name, options):
    """`CachedDecoder` (its encoder pass, then one cached step per token) gives the logits of the
    model's plain forward at every step."""
    model = tiny_model(name, seed=1, **options)
    decoder = CachedDecoder(model)
    src = mixed_batch([9, 4, 6], seed=1)
    tgt = bos_prefixes(3, 11, seed=2)  # [3, 12]
    with torch.no_grad():
        plain = model.encode(src)
        full = model.decode(tgt, plain)  # [3, 12, vocab], teacher forced
        enc = decoder.encode(src)
        torch.testing.assert_close(enc.memory, plain.memory, atol=1e-5, rtol=0)
        assert torch.equal(enc.src_mask, plain.src_mask) and torch.equal(enc.lengths, plain.lengths)
        cache = decoder.new_cache()
        for step in range(tgt.size(1)):
            logits = decoder.decode_step(tgt[:, step : step + 1], enc, cache, offset=step)
            assert logits.shape == (3, VOCAB)
            torch.testing.assert_close(
                logits, full[:, step], atol=1e-5, rtol=0, msg=lambda m, step=step: f"{name} {options} step {step}: {m}"
            )
    # The cache grew one position per step in every layer; the cross-attention cache covers the source.
    for layer in cache:
        assert layer["self"].keys.shape == (3, HEADS, 12, D_MODEL // HEADS)
        assert layer["cross"]["k"].shape == (3, HEADS, 9, D_MODEL // HEADS)


def grouped_cases():
    """Every encoding, and each family that can also act in cross-attention with that switched on."""
    cases = encoding_cases()
    cases += [
        pytest.param(name, {"cross_attention": True}, id=f"{name}-cross") for name in ("alibi", "t5_bias", "shaw")
    ]
    return cases


@pytest.mark.parametrize("name, options", grouped_cases())
def test_beams_share_one_memory_row(name, options):
    """Beam rows read their sentence's single encoder row (cross-attention keys/values computed and
    cached once per sentence) and get exactly what the plain forward over a memory copied for every
    beam gives: the whole prefix in one cached call, or one step at a time."""
    model = tiny_model(name, seed=6, **options)
    decoder = CachedDecoder(model)
    src = mixed_batch([7, 4], seed=6)
    beams = 3
    g = torch.Generator().manual_seed(7)
    tgt = torch.cat([torch.full((6, 1), BOS), torch.randint(4, VOCAB, (6, 5), generator=g)], dim=1)  # [2 * 3, 6]
    with torch.no_grad():
        enc = decoder.encode(src)
        expanded = model.encode(src).index_select(torch.arange(2).repeat_interleave(beams))
        reference = model.decode(tgt, expanded)
        torch.testing.assert_close(decoder.decode(tgt, enc, decoder.new_cache()), reference, atol=1e-5, rtol=0)
        cache = decoder.new_cache()
        steps = torch.stack([decoder.decode_step(tgt[:, s : s + 1], enc, cache, offset=s) for s in range(6)], dim=1)
        torch.testing.assert_close(steps, reference, atol=1e-5, rtol=0)
        assert cache[0]["cross"]["k"].size(0) == 2  # one row per sentence, not per beam
        with pytest.raises(ValueError, match="cannot share"):
            decoder.decode(tgt[:5], enc, decoder.new_cache())
        with pytest.raises(ValueError, match="one encoder row per target row"):  # the plain forward does not fold
            model.decode(tgt, enc)


@pytest.mark.parametrize("name", ["sinusoidal", "rope"])
def test_cached_decoding_pre_norm_gelu_untied(name):
    """The same equality for the other architecture switches (pre-norm, GELU, separate embeddings)."""
    cfg = PositionalConfig(name=name)
    torch.manual_seed(4)
    model = Seq2SeqTransformer(
        src_vocab_size=40,
        tgt_vocab_size=VOCAB,
        pad_id=PAD,
        encoder_pe=build_positional_encoding(cfg, D_MODEL, HEADS, causal=False),
        decoder_pe=build_positional_encoding(cfg, D_MODEL, HEADS, causal=True),
        d_model=D_MODEL,
        num_heads=HEADS,
        num_encoder_layers=1,
        num_decoder_layers=3,
        ffn_dim=48,
        dropout=0.0,
        activation="gelu",
        norm_first=True,
        share_embeddings=False,
        tie_output=False,
    ).eval()
    src = mixed_batch([5, 8], seed=4).clamp(max=39)
    g = torch.Generator().manual_seed(5)
    tgt = torch.cat([torch.full((2, 1), BOS), torch.randint(4, VOCAB, (2, 7), generator=g)], dim=1)
    full, steps = full_and_cached(model, src, tgt)
    assert full.shape == steps.shape == (2, 8, VOCAB)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=0)


def test_the_cached_step_takes_the_layers_own_wiring(monkeypatch):
    """A layer's wiring (residual blocks, norm order) is written once, in models/transformer.py: the
    cached step runs it too, so a changed wiring changes both paths alike and they stay equal."""
    from models.transformer import DecoderLayer, EncoderLayer

    model = tiny_model("rope", seed=3)
    src = mixed_batch([6, 3], seed=3)
    tgt = torch.cat(
        [torch.full((2, 1), BOS), torch.randint(4, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3))], 1
    )
    before, _ = full_and_cached(model, src, tgt)

    def encoder_wiring(layer, x, self_attention, feed_forward):  # a feed-forward block first, no norms
        x = x + feed_forward(x)
        return x + self_attention(x)

    def decoder_wiring(layer, x, self_attention, cross_attention, feed_forward):
        x = x + cross_attention(x)
        x = x + feed_forward(x)
        return x + self_attention(x)

    monkeypatch.setattr(EncoderLayer, "run_sublayers", encoder_wiring)
    monkeypatch.setattr(DecoderLayer, "run_sublayers", decoder_wiring)
    full, steps = full_and_cached(model, src, tgt)
    assert (full - before).abs().max() > 0.1  # the new wiring computes something else
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name, options", encoding_cases())
def test_reorder_cache_follows_rows(name, options):
    """Reordering the cache (as beam search does) equals decoding the reordered batch."""
    model = tiny_model(name, seed=3, **options)
    src = mixed_batch([5, 7, 3], seed=3)
    tgt = bos_prefixes(3, 5, seed=4)
    index = torch.tensor([2, 0, 0])
    decoder = CachedDecoder(model)
    with torch.no_grad():
        enc = decoder.encode(src)
        cache = decoder.new_cache()
        decoder.decode(tgt[:, :4], enc, cache)
        decoder.reorder_cache(cache, index, index)
        step = decoder.decode_step(tgt[index, 4:5], enc.index_select(index), cache, offset=4)
        full = model.decode(tgt[index], model.encode(src[index]))
    torch.testing.assert_close(step, full[:, 4], atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------- padding


@pytest.mark.parametrize("name, options", encoding_cases())
def test_padding_does_not_change_other_rows(name, options):
    model = tiny_model(name, seed=5, **options)
    src = mixed_batch([10, 3, 7], seed=5)  # short sentences padded to the longest
    tgt = bos_prefixes(3, 6, seed=6)
    tgt_lens = [7, 4, 2]
    for i, n in enumerate(tgt_lens):
        tgt[i, n:] = PAD  # padded targets too
    with torch.no_grad():
        enc = model.encode(src)
        batch_logits = model.decode(tgt, enc)
        for i in range(3):
            alone_src = trim(src[i])
            alone = model.encode(alone_src)
            n_src = alone_src.size(1)
            torch.testing.assert_close(enc.memory[i, :n_src], alone.memory[0], atol=1e-5, rtol=1e-5)
            alone_logits = model.decode(tgt[i : i + 1, : tgt_lens[i]], alone)
            torch.testing.assert_close(batch_logits[i, : tgt_lens[i]], alone_logits[0], atol=1e-5, rtol=1e-5)
