"""Decoding without the cache (decoding/full_prefix.py: the plain forward over the whole prefix every
step) finds what the cached step finds, for every encoding."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny_model

from decoding.full_prefix import FullPrefixDecoder
from decoding.search import beam_search, greedy_search
from decoding.step import CachedDecoder
from models.positional_encodings import POSITIONAL_ENCODINGS


def tiny(name: str):
    """`tiny_model` with its learned position tables drawn from N(0, 1), so that they matter."""
    model = tiny_model(name, 0, vocab=40)
    for n, p in model.named_parameters():
        if "table" in n:
            torch.nn.init.normal_(p)
    return model.eval()


@pytest.mark.parametrize("name", sorted(POSITIONAL_ENCODINGS))
def test_uncached_search_equals_cached_search(name: str) -> None:
    model = tiny(name)
    src = torch.randint(4, 40, (3, 6))
    src[1, 4:] = 0
    kw = dict(max_len_a=1.0, max_len_b=4)
    cached = greedy_search(CachedDecoder(model), src, 2, 3, 0, **kw)
    uncached = greedy_search(FullPrefixDecoder(model), src, 2, 3, 0, **kw)
    assert [h.tokens for h in cached] == [h.tokens for h in uncached]
    assert [h.score for h in cached] == pytest.approx([h.score for h in uncached], abs=1e-4)
    cached = beam_search(CachedDecoder(model), src, 2, 3, 0, beam_size=3, nbest=3, **kw)
    uncached = beam_search(FullPrefixDecoder(model), src, 2, 3, 0, beam_size=3, nbest=3, **kw)
    assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in uncached]
