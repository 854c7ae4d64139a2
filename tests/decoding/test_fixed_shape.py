"""The fixed-shape decoding step (decoding/fixed_shape.py): the model's plain forward at every step,
the cached search's hypotheses for every encoding, a cache whose shapes and storage stay put, the
searches' leave policy for it, and (on a GPU) the CUDA-graph replay equal to the eager step."""

from __future__ import annotations

import pytest
import torch
from helpers import BOS, EOS, PAD, bos_prefixes, encoding_cases, mixed_batch, tiny_model

from decoding.fixed_shape import FixedShapeDecoder
from decoding.search import _leaves, beam_search, greedy_search
from decoding.step import CachedDecoder


def cases():
    """Every encoding, and each family that can also act in cross-attention with that switched on."""
    extra = [pytest.param(n, {"cross_attention": True}, id=f"{n}-cross") for n in ("alibi", "t5_bias", "shaw")]
    return encoding_cases() + extra


@pytest.mark.parametrize("name, options", cases())
def test_fixed_shape_steps_equal_the_full_decode(name, options):
    """One token per call over the whole zero-filled cache under the positions-held mask gives the
    logits of the model's teacher-forced forward at every step."""
    model = tiny_model(name, seed=1, **options)
    decoder = FixedShapeDecoder(model)
    src = mixed_batch([9, 4, 6], seed=1)
    tgt = bos_prefixes(3, 11, seed=2)  # [3, 12]
    with torch.no_grad():
        full = model.decode(tgt, model.encode(src))  # [3, 12, vocab]
        enc = decoder.encode(src)
        cache = decoder.new_cache(capacity=16)  # more than the steps: positions past them stay masked
        storage = None
        for step in range(tgt.size(1)):
            logits = decoder.decode_step(tgt[:, step : step + 1], enc, cache, offset=step)
            torch.testing.assert_close(logits, full[:, step], atol=1e-5, rtol=0, msg=lambda m, s=step: f"step {s}: {m}")
            storage = storage or cache.kv.data_ptr()
            assert cache.kv.shape[4] == 16 and cache.kv.data_ptr() == storage  # one allocation, never grown
    assert int(cache.offset) == tgt.size(1) - 1


@pytest.mark.slow
@pytest.mark.parametrize("name, options", cases())
def test_fixed_shape_search_finds_what_the_cached_search_finds(name, options):
    """Greedy and beam search (4 beams, 2-best) through the fixed-shape step find the cached step's
    hypotheses, scores within float noise, for every encoding."""
    model = tiny_model(name, seed=3, **options)
    src = mixed_batch([7, 3, 9, 5, 2], seed=4)
    args = (BOS, EOS, PAD)
    limits = dict(max_len_a=1.5, max_len_b=6)
    with torch.no_grad():
        for search, kwargs in ((greedy_search, {}), (beam_search, dict(beam_size=4, nbest=2))):
            cached = search(CachedDecoder(model), src, *args, **limits, **kwargs)
            fixed = search(FixedShapeDecoder(model), src, *args, **limits, **kwargs)
            if search is greedy_search:
                cached, fixed = [[h] for h in cached], [[h] for h in fixed]
            assert any(h.tokens for hyps in cached for h in hyps)  # not a degenerate all-empty comparison
            for i, (want, got) in enumerate(zip(cached, fixed)):
                assert [h.tokens for h in got] == [h.tokens for h in want], f"{search.__name__} sentence {i}"
                for w, h in zip(want, got):
                    assert h.score == pytest.approx(w.score, abs=1e-4)
                    assert h.normalized_score == pytest.approx(w.normalized_score, abs=1e-4)


def test_the_cache_keeps_its_layout_until_rows_are_regrouped_or_leave():
    """Beams move in place (a captured step reads the same storage); a regroup or sentences leaving
    make a new layout (`version`), and the storage past the positions held is zeros."""
    model = tiny_model("alibi", seed=2)
    decoder = FixedShapeDecoder(model)
    src = mixed_batch([5, 4, 6], seed=2)
    with torch.no_grad():
        enc = decoder.encode(src)
        cache = decoder.new_cache(capacity=8)
        decoder.decode_step(torch.full((3, 1), BOS), enc, cache, offset=0)
        assert cache.version == 0 and not cache.kv[:, :, :, :, 1:].any()  # zeros past the one position held
        decoder.reorder_cache(cache, torch.arange(3).repeat_interleave(2), None, groups=2)  # two beams each
        assert cache.version == 1
        tokens = torch.tensor([[5], [6], [7], [8], [9], [10]])
        decoder.decode_step(tokens, enc, cache, offset=1)
        ancestry = cache.ancestry.data_ptr()
        decoder.reorder_beams(cache, torch.tensor([[1, 1], [0, 1], [1, 0]]))
        assert cache.ancestry.data_ptr() == ancestry and cache.version == 1
        assert cache.ancestry[0, :, 1].tolist() == [[False, True], [False, True]]  # both rows continue beam 1
        decoder.reorder_cache(cache, torch.tensor([2, 3, 4, 5]), torch.tensor([1, 2]))  # sentence 0 leaves
        assert cache.version == 2 and cache.sentences == 2
        with pytest.raises(ValueError, match="one token within the capacity"):
            decoder.decode_step(torch.ones(4, 1, dtype=torch.long), enc.index_select(torch.tensor([1, 2])), cache, 8)
    with pytest.raises(ValueError, match="capacity"):
        decoder.new_cache()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alibi", "learnable-randomized"])
def test_one_decoder_serves_search_after_search(name):
    """A decoder reused over searches of other batches and capacities finds what a fresh one finds:
    what it computes once per layout serves only that search's cache and encoder output."""
    options = {"randomized": True, "max_position": 64} if name.endswith("randomized") else {}
    model = tiny_model(name.split("-")[0], seed=8, **options)
    batches = [mixed_batch([3 + (i % 5) * 3, 2], seed=i) for i in range(30)]
    with torch.no_grad():
        fresh = [greedy_search(FixedShapeDecoder(model), src, BOS, EOS, PAD, max_len_a=1.5) for src in batches]
        reused = FixedShapeDecoder(model)
        for i, src in enumerate(batches):
            again = greedy_search(reused, src, BOS, EOS, PAD, max_len_a=1.5)
            assert [h.tokens for h in again] == [h.tokens for h in fresh[i]], f"search {i}"


def test_sentences_leave_a_fixed_shape_search_only_when_at_most_half_remain():
    """The cached search drops every done sentence at a check; a fixed-shape one keeps their rows
    (masked) until at most half the batch is left, so a batch takes few layouts."""
    assert _leaves(CachedDecoder(tiny_model()), 7, 8)
    assert not _leaves(FixedShapeDecoder(tiny_model()), 5, 8)
    assert _leaves(FixedShapeDecoder(tiny_model()), 4, 8)
    model = tiny_model("sinusoidal", seed=5)
    decoder = FixedShapeDecoder(model)
    rows_seen = []
    step = decoder.decode_step
    decoder.decode_step = lambda tokens, *rest, **kw: rows_seen.append(tokens.size(0)) or step(tokens, *rest, **kw)
    with torch.no_grad():
        beam_search(decoder, mixed_batch([2, 9, 3, 8, 1, 7], seed=5), BOS, EOS, PAD, beam_size=2, max_len_a=2)
    assert rows_seen[:2] == [6, 12]  # one row per sentence at the first step, then two beams each
    later = rows_seen[1:]
    assert later == sorted(later, reverse=True) and later[-1] < 12  # sentences did leave
    shrinks = [(a, b) for a, b in zip(later, later[1:]) if b < a]
    assert all(b <= a // 2 for a, b in shrinks), rows_seen  # each time at most half were left


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sinusoidal", "rope", "alibi", "t5_bias"])
def test_cuda_graph_replay_equals_the_eager_fixed_shape_step(name):
    """On a GPU, the captured and replayed step finds what the same step run eagerly finds (the
    graphs capture once per layout: beam search regroups, and sentences leave)."""
    model = tiny_model(name, seed=6).cuda().eval()
    src = mixed_batch([7, 3, 9, 5, 2, 11, 4, 6], seed=6).cuda()
    with torch.no_grad():
        for kwargs in ({"beam_size": 4, "nbest": 2}, {"beam_size": 1}):
            eager = beam_search(FixedShapeDecoder(model), src, BOS, EOS, PAD, max_len_a=2, **kwargs)
            graphed_decoder = FixedShapeDecoder(model, cuda_graphs=True)
            graphed = beam_search(graphed_decoder, src, BOS, EOS, PAD, max_len_a=2, **kwargs)
            assert graphed_decoder.cuda_graphs and graphed_decoder._layout is not None
            assert [[h.tokens for h in hyps] for hyps in graphed] == [[h.tokens for h in hyps] for hyps in eager]
        graphed_decoder = FixedShapeDecoder(model, cuda_graphs=True)
        greedy = greedy_search(graphed_decoder, src, BOS, EOS, PAD, max_len_a=2)
        assert graphed_decoder._layout.graph is not None  # greedy keeps one layout: captured, replayed
        assert [h.tokens for h in greedy] == [
            h.tokens for h in greedy_search(CachedDecoder(model), src, BOS, EOS, PAD, max_len_a=2)
        ]
