"""Fixtures of the decoding tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def trained(trained_run: Path):
    """(config, tokenizer) of the tiny trained run."""
    from artifacts.checkpoint import find_best_checkpoint
    from artifacts.loading import load_model

    loaded = load_model(find_best_checkpoint(trained_run))

    cfg, tokenizer = loaded.config, loaded.tokenizer
    return cfg, tokenizer
