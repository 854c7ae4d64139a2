"""decoding/linear.py: the transposed CPU inference product computes what `F.linear` computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import BOS, mixed_batch, tiny_model
from torch import nn

from decoding.linear import FEW_ROWS, linear
from decoding.step import CachedDecoder


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 16), (3, 1, 16), (2, 5, 16), (FEW_ROWS, 16)])
def test_inference_product_equals_f_linear_and_is_feature_major(shape, bias):
    torch.manual_seed(0)
    layer = nn.Linear(16, 24, bias=bias)
    x = torch.randn(*shape)
    with torch.no_grad():
        got = linear(x, layer.weight, layer.bias)
    rows = x.numel() // 16
    assert got.shape == (*shape[:-1], 24)
    assert got.reshape(rows, 24).stride() == (1, rows)  # the transposed product was taken
    torch.testing.assert_close(got, F.linear(x, layer.weight, layer.bias), atol=1e-6, rtol=1e-5)
    following = nn.Linear(24, 8, bias=bias)  # takes the feature-major output as it is
    with torch.no_grad():
        torch.testing.assert_close(
            linear(got, following.weight, following.bias),
            F.linear(got.contiguous(), following.weight, following.bias),
            atol=1e-6,
            rtol=1e-5,
        )


def test_training_gpu_and_long_inputs_keep_f_linear():
    """Autograd and inputs longer than FEW_ROWS take `F.linear` (row-major output, gradients as usual)."""
    torch.manual_seed(1)
    layer = nn.Linear(16, 24)
    x = torch.randn(3, 16, requires_grad=True)
    out = linear(x, layer.weight, layer.bias)
    assert out.is_contiguous()
    out.sum().backward()
    torch.testing.assert_close(x.grad, layer.weight.sum(0).expand(3, 16))
    with torch.no_grad():
        long = linear(torch.randn(FEW_ROWS + 1, 16), layer.weight, layer.bias)
    assert long.is_contiguous()


def test_decoder_logits_same_with_and_without_autograd():
    """The cached decoder under no_grad (transposed products) equals the model's forward with autograd (F.linear)."""
    model = tiny_model("rope", seed=3)
    decoder = CachedDecoder(model)
    src = mixed_batch([5, 3], seed=3)
    tgt = torch.full((2, 4), BOS)
    tgt[:, 1:] = torch.randint(4, 40, (2, 3), generator=torch.Generator().manual_seed(3))
    reference = model(src, tgt)
    with torch.no_grad():
        got = decoder.decode(tgt, decoder.encode(src), decoder.new_cache())
    torch.testing.assert_close(got, reference.detach(), atol=1e-5, rtol=1e-5)
