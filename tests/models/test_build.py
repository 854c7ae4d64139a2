"""The model builder (models/build.py): the `model` section read once into a Transformer of the
configured sizes, one encoding per stack (the decoder's causal), and a model too large for this
machine's memory refused in one line."""

from __future__ import annotations

import pytest

import models.build
from models.build import ModelTooLargeError, build_model
from settings.config import ModelConfig, PositionalConfig


def test_the_model_has_the_configured_sizes_and_causal_decoder_encoding() -> None:
    cfg = ModelConfig(
        d_model=32,
        num_heads=4,
        ffn_dim=48,
        num_encoder_layers=2,
        num_decoder_layers=3,
        positional=PositionalConfig("rope"),
    )
    model = build_model(cfg, 60, 60, 0)
    assert (len(model.encoder_layers), len(model.decoder_layers), model.d_model, model.num_heads) == (2, 3, 32, 4)
    assert model.decoder_layers[0].ffn.fc1.out_features == 48
    assert model.encoder_pe.registry_name == model.decoder_pe.registry_name == "rope"
    assert not model.encoder_pe.causal and model.decoder_pe.causal
    assert model.output_proj.weight is model.tgt_embed.weight is model.src_embed.weight  # shared and tied


def test_a_model_too_large_is_one_line_naming_the_sizes(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(models.build, "_transformer", refuse)
    with pytest.raises(ModelTooLargeError, match=r"model.d_model=32, model.ffn_dim=48, 6\+6 layers, .* does not fit"):
        build_model(ModelConfig(d_model=32, num_heads=4, ffn_dim=48), 60, 60, 0)
