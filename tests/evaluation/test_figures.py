"""Attention maps and position tables as figures (evaluation/figures.py): every attention row of a
trained model is a distribution over the tokens it may see."""

from __future__ import annotations

from pathlib import Path

from evaluation.figures import attention_maps


def test_attention_rows_are_distributions(trained_run: Path) -> None:
    import torch

    from artifacts.checkpoint import find_best_checkpoint
    from artifacts.loading import load_model

    loaded = load_model(find_best_checkpoint(trained_run))

    tok, model = loaded.tokenizer, loaded.model
    src = torch.tensor([tok.encode_src("Bonjour à tous.")])
    tgt = torch.tensor([[tok.bos_id, *tok.encode_tgt("Hello everyone.")]])
    maps = attention_maps(model, src, tgt)
    for kind, layers in maps.items():
        for weights in layers:
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5), kind
    dec = maps["decoder self-attention"][0]
    assert torch.all(dec.triu(1) == 0)  # causal: no weight on future positions
