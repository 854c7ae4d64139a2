"""Decoding without the cache (the model's plain forward on the whole prefix) equals decoding with it
(`CachedDecoder`); min_len and no-repeat-ngram constraints hold."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny_model

from decoding.full_prefix import FullPrefixDecoder
from decoding.search import beam_search, greedy_search
from decoding.step import CachedDecoder
from models.positional_encodings import POSITIONAL_ENCODINGS
from models.transformer import Seq2SeqTransformer


def tiny(name: str, seed: int = 0) -> Seq2SeqTransformer:
    """`tiny_model` with its learned position tables drawn from N(0, 1), so that they matter."""
    model = tiny_model(name, seed, vocab=40)
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


def test_min_len_forces_the_output_length() -> None:
    model = CachedDecoder(tiny("sinusoidal"))
    src = torch.randint(4, 40, (4, 5))
    for hyps in (
        greedy_search(model, src, 2, 3, 0, max_len_a=0.0, max_len_b=9, min_len=9),
        [h[0] for h in beam_search(model, src, 2, 3, 0, beam_size=3, max_len_a=0.0, max_len_b=9, min_len=9)],
    ):
        assert all(len(h.tokens) == 8 for h in hyps)  # 8 tokens + EOS = 9


def test_no_repeat_ngram_blocks_repeats() -> None:
    model = CachedDecoder(tiny("none", seed=3))
    src = torch.randint(4, 40, (4, 5))
    free = greedy_search(model, src, 2, 3, 0, max_len_a=0.0, max_len_b=30, min_len=30)
    blocked = greedy_search(model, src, 2, 3, 0, max_len_a=0.0, max_len_b=30, min_len=30, no_repeat_ngram=2)

    def has_repeat(tokens: list[int]) -> bool:
        grams = list(zip([2, *tokens], tokens))
        return len(grams) != len(set(grams))

    assert any(has_repeat(h.tokens) for h in free)  # the constraint has something to do
    assert not any(has_repeat(h.tokens) for h in blocked)
    beams = beam_search(
        model, src, 2, 3, 0, beam_size=3, max_len_a=0.0, max_len_b=30, min_len=30, no_repeat_ngram=2, nbest=3
    )
    assert not any(has_repeat(h.tokens) for hs in beams for h in hs)


@pytest.mark.parametrize("name", ["sinusoidal", "rope", "t5_bias", "learnable"])
@pytest.mark.parametrize(
    "options",
    [
        dict(beam_size=4, nbest=4, penalty="wu", alpha=0.6),
        dict(beam_size=3, nbest=2, penalty="avg", min_len=4, check_every=8),
        dict(beam_size=3, nbest=3, penalty="none", no_repeat_ngram=2),
    ],
    ids=["beam4-nbest4", "beam3-min-len-check8", "beam3-no-repeat"],
)
def test_beam_search_equals_the_frozen_search_before_the_history(name: str, options: dict) -> None:
    """The hypotheses read back from the beam history (tokens and parent pointers, backtracked once)
    are those of the search that copied every prefix each step (benchmarks/legacy_search.py, frozen):
    same tokens, same scores, same order, for every sentence of a mixed batch."""
    from benchmarks.legacy_search import beam_search as frozen_beam_search

    model = tiny(name, seed=5)
    src = torch.randint(4, 40, (6, 7), generator=torch.Generator().manual_seed(5))
    src[1, 3:], src[4, 5:] = 0, 0
    kw = dict(max_len_a=1.5, max_len_b=3, **options)
    ours = beam_search(CachedDecoder(model), src, 2, 3, 0, **kw)
    frozen = frozen_beam_search(
        CachedDecoder(model), src, 2, 3, 0, **{k: v for k, v in kw.items() if k != "check_every"}
    )
    assert sum(len(h.tokens) for hs in ours for h in hs) > 20  # not a comparison of empty outputs
    assert [[h.tokens for h in hs] for hs in ours] == [[h.tokens for h in hs] for hs in frozen]
    flat = [h.score for hs in ours for h in hs]
    assert flat == pytest.approx([h.score for hs in frozen for h in hs], abs=1e-5)
