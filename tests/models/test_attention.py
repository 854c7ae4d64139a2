"""Multi-head attention (models/attention.py): its one CPU branch computes what SDPA computes."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("q_len", [1, 5, 16, 17])
@pytest.mark.parametrize("mask_kind", ["none", "padding", "per_head_bias"])
def test_the_models_cpu_branch_computes_what_sdpa_computes(q_len: int, mask_kind: str) -> None:
    """models.attention.scaled_dot_product: a few queries per row on a CPU are two batched matmuls
    (the one branch the model keeps), longer ones SDPA; both are softmax(q kᵀ/√d + mask) v."""
    import torch.nn.functional as F

    from models.attention import SHORT_QUERY, scaled_dot_product

    torch.manual_seed(0)
    batch, heads, k_len, head_dim = 3, 2, 9, 8
    q, k, v = (torch.randn(batch, heads, n, head_dim) for n in (q_len, k_len, k_len))
    mask = {
        "none": None,
        "padding": torch.arange(k_len)[None, None, None, :] < torch.tensor([9, 6, 2])[:, None, None, None],
        "per_head_bias": torch.randn(batch, heads, q_len, k_len),
    }[mask_kind]
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(scaled_dot_product(q, k, v, mask, False, 0.0), expected, atol=1e-6)
    assert (q_len <= SHORT_QUERY) == (q_len != 17)  # both sides of the branch are exercised
