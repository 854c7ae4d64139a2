"""Models for the CTranslate2 tests (tests/decoding/test_ctranslate2_spec.py, test_ctranslate2_backend.py):
the tiny trained run's tokenizer and config with any encoding swapped in, random weights, written as
a PyTorch export; random source and target ids."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import give_bias_tables_a_signal


def pytorch_export(trained, folder: Path, name: str, options: dict, norm_first: bool, **model_keys):
    """A PyTorch export of a random-weight model with the trained run's tokenizer and `name`
    (`model_keys`: other model.* keys)."""
    from artifacts.export import write_export
    from models.build import build_model
    from settings.config import load_config, to_dict

    cfg, tokenizer = trained
    raw = to_dict(cfg)
    raw["data"]["max_len"] = 60
    raw["model"].update(num_encoder_layers=2, num_decoder_layers=2, norm_first=norm_first, **model_keys)
    raw["model"]["positional"] = {"name": name, **options}
    raw["decoding"]["length_penalty"] = "avg"
    cfg = load_config(raw=raw)
    torch.manual_seed(1)
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id).eval()
    give_bias_tables_a_signal(model, 2)
    write_export(cfg, tokenizer, model, folder, {"exported_from": "test"})
    return model


def random_pairs(vocab: int, seed: int = 3) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    sources = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in (5, 17, 40, 1)]
    targets = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in (30, 9, 45, 2)]
    return sources, targets
