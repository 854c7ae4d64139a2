"""Every registered encoding through the base hooks (models/positional_encodings/base.py): the registry,
decoding with offsets, forward and backward, the recorded training length, a config for each study."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import BOS, D_MODEL, HEADS, PAD, VOCAB, encoding_cases, tiny_model

from decoding.step import CachedDecoder
from models.positional_encodings import POSITIONAL_ENCODINGS, T5RelativeBias, build_positional_encoding
from models.transformer import Seq2SeqTransformer
from settings.config import PositionalConfig, load_config


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


def test_every_registered_encoding_has_a_length_config_and_a_joined_pairs_config():
    """configs/length/<name>.yaml and <name>_concat.yaml for every registered encoding (future
    ones included); each _concat config is its single-sentence config plus the one joined-pairs
    setting shared by all of them."""
    from pathlib import Path

    from settings.config import flatten, to_dict

    folder = Path(__file__).resolve().parents[3] / "configs" / "length"
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


def make_pe(name: str, causal: bool, d_model: int = D_MODEL, num_heads: int = HEADS, **options):
    """Any registered encoding, built the way the config builds it (future encodings included)."""
    cfg = PositionalConfig(name=name, options={"max_positions": 64, **options} if name == "learnable" else options)
    return build_positional_encoding(cfg, d_model, num_heads, causal)


def random_tokens(batch: int, length: int, generator=None) -> torch.Tensor:
    return torch.randint(4, VOCAB, (batch, length), generator=generator)


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


def test_every_encoding_in_the_study_is_registered() -> None:
    assert {"sinusoidal", "learnable", "rope", "alibi", "t5_bias", "shaw", "none", "shape"} <= set(POSITIONAL_ENCODINGS)
    assert isinstance(build_positional_encoding(PositionalConfig(name="t5_bias"), 32, 4, False), T5RelativeBias)
    assert math.isclose(float(build_positional_encoding(PositionalConfig(name="alibi"), 32, 4, False).slopes[0]), 0.25)
