"""The Transformer (models/transformer.py): its initialisation is in a fixed order and leaves an
encoding's own initialisation alone."""

from __future__ import annotations

import torch
from helpers import PAD, tiny_model

from settings.config import load_config


def test_fire_mlp_keeps_its_own_initialisation_in_the_model():
    """The model zeroes its layers' biases at init; an encoding's MLP (FIRE) keeps nn.Linear's own."""
    model = tiny_model("fire", seed=3)
    for mlp in (model.encoder_pe.mlp, model.decoder_pe.mlp):
        assert mlp[0].bias.abs().sum() > 0 and mlp[2].bias.abs().sum() > 0


def test_separate_embeddings_are_initialised_in_a_fixed_order(monkeypatch) -> None:
    """With share_embeddings false, the source table draws its initial values before the target's,
    every time: the order once followed the objects' addresses (a set), so a seed did not fix it."""
    from models.build import build_model

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
