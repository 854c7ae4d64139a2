"""Attention at decoding steps (decoding/attend.py): beams folded into the query axis of their
sentence's memory row, masks laid out per head once, a key index standing for an ancestry mask, and
`attend` computing softmax(q kᵀ/√d + mask) v on every path (the C kernel's own tests:
test_cpu_kernel.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from decoding.attend import attend, fold_groups, index_mask, per_head_mask, rows_per_memory_row


def test_rows_per_memory_row() -> None:
    assert rows_per_memory_row(12, 3) == 4 and rows_per_memory_row(3, 3) == 1
    with pytest.raises(ValueError, match="cannot share"):
        rows_per_memory_row(10, 3)


def test_folded_beams_attend_as_unfolded_rows() -> None:
    torch.manual_seed(0)
    sentences, beams, heads, k_len, d = 2, 3, 2, 5, 8
    q = torch.randn(sentences * beams, heads, 1, d)
    k, v = torch.randn(sentences, heads, k_len, d), torch.randn(sentences, heads, k_len, d)
    mask = torch.arange(k_len)[None, None, None, :] < torch.tensor([5, 3])[:, None, None, None]  # [S, 1, 1, k]
    folded, folded_mask, groups = fold_groups(q, sentences, mask)
    assert folded.shape == (sentences, heads, beams, d) and groups == beams
    out = attend(folded, k, v, folded_mask, False, 0.0)  # [S, heads, beams, d]
    rows = torch.arange(sentences).repeat_interleave(beams)
    expected = F.scaled_dot_product_attention(q, k[rows], v[rows], attn_mask=mask[rows])  # [rows, heads, 1, d]
    torch.testing.assert_close(out.transpose(1, 2).reshape(sentences * beams, heads, 1, d), expected, atol=1e-5, rtol=0)


def test_a_per_head_mask_is_the_bool_mask_as_added_scores() -> None:
    mask = torch.tensor([[[[True, False, True]]]])  # [1, 1, 1, 3]
    laid = per_head_mask(mask, rows=2, heads=3)
    assert laid.shape == (2, 3, 1, 3) and laid.is_contiguous()
    assert laid[1, 2, 0].tolist() == [0.0, float("-inf"), 0.0] and per_head_mask(None, 2, 3) is None


def test_a_key_index_stands_for_the_mask_of_those_keys() -> None:
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 2, 2, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    key_index = torch.tensor([[[0, 2, 4], [1, 3, 5]]], dtype=torch.int32)  # each query reads 3 keys
    allowed = index_mask(key_index, 6, None)
    assert allowed[0, 0].tolist() == [[True, False, True, False, True, False], [False, True, False, True, False, True]]
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(attend(q, k, v, None, False, 0.0, key_index), expected, atol=1e-5, rtol=0)
