"""Randomized positions (models/positional_encodings/randomized.py): training draws sorted distinct
subsets of the range, inference one seeded draw per sequence, a learnable table as large as the range."""

from __future__ import annotations

import pytest
import torch
from helpers import D_MODEL, HEADS

from models.positional_encodings import (
    LearnablePositionalEncoding,
    SinusoidalPositionalEncoding,
    build_positional_encoding,
)
from models.positional_encodings.randomized import inference_cover
from settings.config import ConfigError, PositionalConfig, load_config

CPU = torch.device("cpu")


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
