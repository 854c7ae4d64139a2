"""The CPU dropout (models/dropout.py): the distribution, the gradient, reproducibility."""

import math

import pytest
import torch
import torch.nn.functional as F

from models.dropout import BitMaskDropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keep_rate_is_one_minus_p_in_every_lane(p):
    """Each 64-bit word feeds four elements; every lane position must be kept at rate 1 - p
    (a generator that leaves a word's top bit zero would bias the fourth lane)."""
    torch.manual_seed(0)
    n = 400_000
    keep, scale = keep_mask(torch.Size([n]), p)
    assert keep.dtype == torch.bool and keep.shape == (n,)
    sd = math.sqrt(p * (1 - p) / (n / 4))
    for lane in range(4):
        rate = keep.view(-1, 4)[:, lane].float().mean().item()
        assert abs(rate - (1 - p)) < 5 * sd, (lane, rate)
    assert scale == pytest.approx(1 / (1 - p), rel=1e-4)


def test_masks_of_neighbouring_elements_are_independent():
    torch.manual_seed(1)
    keep, _ = keep_mask(torch.Size([200_000]), 0.5)
    both = (keep[:-1] & keep[1:]).float().mean().item()
    assert abs(both - 0.25) < 0.01


def test_expectation_and_gradient():
    torch.manual_seed(2)
    x = torch.randn(256, 512, requires_grad=True)
    y = dropout(x, 0.1)
    kept = y != 0
    scale = 65536 / (65536 - round(0.1 * 65536))
    torch.testing.assert_close(y[kept], x[kept] * scale)
    assert abs(kept.float().mean().item() - 0.9) < 0.005
    # E[y] = x: the average over many draws of a constant input stays at that constant
    ones = torch.ones(1000, 1000)
    assert abs(dropout(ones, 0.1).mean().item() - 1.0) < 0.005
    g = torch.randn_like(x)
    y.backward(g)
    torch.testing.assert_close(x.grad, torch.where(kept, g * scale, 0.0))


def test_same_seed_same_mask_and_eval_is_identity():
    layer = BitMaskDropout(0.2)
    x = torch.randn(64, 128)
    torch.manual_seed(3)
    a = layer(x)
    torch.manual_seed(3)
    b = layer(x)
    assert torch.equal(a, b)
    assert not torch.equal(a, layer(x))  # the generator moved on
    layer.eval()
    assert torch.equal(layer(x), x)
    assert repr(layer) == "BitMask" + repr(torch.nn.Dropout(0.2))  # same settings as nn.Dropout


def test_edge_rates_dtypes_and_shapes():
    x = torch.randn(3, 5, 7)
    assert torch.equal(dropout(x, 0.0), x)
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    assert dropout(x.to(torch.bfloat16), 0.1).dtype == torch.bfloat16
    assert dropout(torch.empty(0, 4), 0.1).shape == (0, 4)
    t = x.transpose(0, 2)  # non-contiguous input
    y = dropout(t, 0.5)
    assert y.shape == t.shape and torch.equal(y[y != 0], t[y != 0] * 2)


def test_matches_torch_dropout_in_distribution():
    """Same drop rate and the same per-element second moment as F.dropout."""
    torch.manual_seed(4)
    x = torch.randn(500, 500)
    ours, ref = dropout(x, 0.3), F.dropout(x, 0.3)
    assert abs((ours == 0).float().mean() - (ref == 0).float().mean()) < 0.01
    assert abs(ours.pow(2).mean() - ref.pow(2).mean()) < 0.05
