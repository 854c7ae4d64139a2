"""The decoder's key/value cache (decoding/cache.py): beams that never move, an ancestry map instead.

Reference for every check: the model's plain decoder run on each row's whole token history, with
the encoder memory copied for every row — no cache, no grouping, nothing shared. The cached steps
are `decoding.step.CachedDecoder`'s.
"""

from __future__ import annotations

import os

import pytest
import torch
from helpers import (
    BOS,
    D_MODEL,
    HEADS,
    VOCAB,
    check_random_beam_steps,
    encoding_cases,
    give_bias_tables_a_signal,
    mixed_batch,
    reference_step,
    tiny_model,
)

from decoding.cache import DecoderCache
from decoding.step import CachedDecoder


@pytest.mark.parametrize("kernel", ["matmul", "sdpa"])
@pytest.mark.parametrize("name, options", encoding_cases())
def test_grouped_cache_follows_beam_reorders_and_dropped_sentences(name, options, kernel, monkeypatch):
    """3 sentences x 4 beams, 7 steps of random beam reorders, a sentence leaving at step 4
    (`check_random_beam_steps`): the cached step equals decoding every row's history from
    scratch, at every step — through the CPU's short-query matmul path and through SDPA with the
    folded mask (what a GPU runs)."""
    if kernel == "sdpa":
        monkeypatch.setattr("models.attention.SHORT_QUERY", 0)
    model = give_bias_tables_a_signal(tiny_model(name, seed=11, **options), seed=11)
    beams = 4
    decoder, cache, enc, sentences, history = check_random_beam_steps(model, f"{name} {options}", beams)
    with torch.no_grad():
        assert cache.sentences == 2 and cache.capacity >= 7
        # Each row's cached keys, gathered along its ancestry, are the keys of its own history.
        fresh = decoder.new_cache()
        decoder.decode(history[:, :-1], enc.index_select(sentences.repeat_interleave(beams)), fresh)
        torch.testing.assert_close(cache[1]["self"].keys, fresh[1]["self"].keys, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kernel", ["matmul", "sdpa"])
@pytest.mark.parametrize("name, options", encoding_cases())
def test_cache_changes_rows_per_sentence(name, options, kernel, monkeypatch):
    """Beam search decodes its first step with one row per sentence, then regroups the cache to
    `beam` rows. Here rows per sentence go 1, 1, 4 (with a sentence leaving), 4, 2, 2: the cached
    step equals decoding every row's history from scratch, at every step."""
    if kernel == "sdpa":
        monkeypatch.setattr("models.attention.SHORT_QUERY", 0)
    model = give_bias_tables_a_signal(tiny_model(name, seed=21, **options), seed=21)
    decoder = CachedDecoder(model)
    groups_after = [1, 4, 4, 2, 2, 2]  # rows per sentence after each step's reorder
    g = torch.Generator().manual_seed(22)
    src = mixed_batch([6, 3, 8], seed=22)
    with torch.no_grad():
        enc, plain_enc = decoder.encode(src), model.encode(src)
        sentences, groups = torch.arange(3), 1
        history = torch.full((3, 1), BOS)
        cache = decoder.new_cache(capacity=8)
        for step, new_groups in enumerate(groups_after):
            got = decoder.decode_step(history[:, -1:], enc.index_select(sentences), cache, offset=step)
            expected = reference_step(model, history, plain_enc, sentences.repeat_interleave(groups))
            torch.testing.assert_close(
                got, expected, atol=1e-5, rtol=0, msg=lambda m, step=step: f"{name} step {step}: {m}"
            )
            keep = torch.tensor([0, 2]) if step == 1 else torch.arange(sentences.numel())
            if new_groups < groups:  # distinct parents: each kept row's own history must move into its slot
                parents = torch.stack([torch.randperm(groups, generator=g)[:new_groups] for _ in sentences])
            else:
                parents = torch.randint(0, groups, (sentences.numel(), new_groups), generator=g)
            index = (keep[:, None] * groups + parents[keep]).view(-1)
            decoder.reorder_cache(cache, index, keep if keep.numel() < sentences.numel() else None, groups=new_groups)
            sentences, groups = sentences[keep], new_groups
            history = torch.cat(
                [history.index_select(0, index), torch.randint(4, VOCAB, (index.numel(), 1), generator=g)], dim=1
            )
        assert (cache.sentences, cache.groups) == (2, 2)
        with pytest.raises(ValueError, match="mixes sentences"):
            decoder.reorder_cache(cache, torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1]), groups=4)
        with pytest.raises(ValueError, match="does not fill groups of 3"):
            decoder.reorder_cache(cache, torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1]), groups=3)


def one_step_of_two_sentences_by_three_beams():
    """A model's `CachedDecoder` and its cache after decoding BOS for 2 sentences x 3 beams (capacity 4)."""
    decoder = CachedDecoder(tiny_model("sinusoidal", seed=13))
    with torch.no_grad():
        cache = decoder.new_cache(capacity=4)
        decoder.decode_step(torch.full((6, 1), BOS), decoder.encode(mixed_batch([5, 4], seed=13)), cache, offset=0)
    return decoder, cache


def test_cache_moves_only_the_ancestry_when_beams_reorder():
    """A within-sentence reorder leaves the key buffers untouched (same storage, same values)."""
    decoder, cache = one_step_of_two_sentences_by_three_beams()
    with torch.no_grad():
        held = slice(0, cache.length)  # positions past it are uninitialised memory (may hold NaNs)
        storage, snapshot = cache.kv, cache.kv[:, :, :, :, held].clone()
        decoder.reorder_cache(cache, torch.tensor([2, 2, 0, 4, 3, 3]))
        assert cache.kv is storage and torch.equal(cache.kv[:, :, :, :, held], snapshot)
        assert cache.ancestry[:, :, 0].long().argmax(-1).tolist() == [[2, 2, 0], [1, 0, 0]]


def test_ancestor_keys_point_at_each_rows_ancestors():
    """`ancestor_keys()`: per row and position, the index `position * groups + slot` of the slot
    holding the row's token there, following reorders; refused where it has no meaning."""
    decoder, cache = one_step_of_two_sentences_by_three_beams()
    with torch.no_grad():
        decoder.reorder_cache(cache, torch.tensor([2, 2, 0, 4, 3, 3]))  # parents: [2, 2, 0], [1, 0, 0]
        cache.extend(6, 2, 1, 1, torch.device("cpu"))  # what the next decode call reserves
        keys = cache.ancestor_keys()
        assert keys.dtype == torch.int32 and keys.shape == (2, 3, 2)
        assert keys[..., 0].tolist() == [[2, 2, 0], [1, 0, 0]]  # position 0: the parent's slot
        assert keys[..., 1].tolist() == [[3, 4, 5], [3, 4, 5]]  # position 1: the row's own slot, 1 * 3 + g
        with pytest.raises(ValueError, match="one new position"):
            decoder.new_cache().ancestor_keys()


def test_cache_refuses_inconsistent_calls():
    """Clear errors for what would silently corrupt a cache."""
    decoder = CachedDecoder(tiny_model("rope", seed=14))
    src = mixed_batch([5, 4], seed=14)
    with torch.no_grad():
        enc = decoder.encode(src)
        cache = decoder.new_cache()
        decoder.decode_step(torch.full((6, 1), BOS), enc, cache, offset=0)
        with pytest.raises(ValueError, match="pass offset=1"):
            decoder.decode_step(torch.full((6, 1), BOS), enc, cache, offset=3)
        with pytest.raises(ValueError, match="use reorder_cache"):
            decoder.decode_step(torch.full((4, 1), BOS), enc, cache, offset=1)
        with pytest.raises(ValueError, match="mixes sentences"):
            decoder.reorder_cache(cache, torch.tensor([0, 1, 3, 3, 4, 5]))
        with pytest.raises(ValueError, match="pass memory_index"):
            decoder.reorder_cache(cache, torch.tensor([3, 4, 5, 0, 1, 2]))
        with pytest.raises(ValueError, match="cannot share"):
            decoder.decode(torch.full((5, 1), BOS), enc, decoder.new_cache())


def test_one_row_per_sentence_has_no_ancestry_and_reorders_rows():
    """Greedy-style caches (one row per sentence) keep plain per-row buffers."""
    cache = DecoderCache(num_layers=1, capacity=2)
    cache.extend(rows=3, memory_rows=3, new=1, offset=0, device=torch.device("cpu"))
    k = torch.randn(3, HEADS, 1, D_MODEL // HEADS)
    keys, _ = cache[0]["self"].append(k, k)
    assert cache.ancestry is None and torch.equal(keys, k)
    cache.reorder(torch.tensor([2, 0]), torch.tensor([2, 0]))
    torch.testing.assert_close(cache[0]["self"].keys, k[[2, 0]])


@pytest.mark.parametrize(
    "mask_kind", ["none", "bool", "float", "float_shared_by_heads", "per_head_from_bool", "per_head_one_query_row"]
)
@pytest.mark.parametrize("q_len", [1, 5, 16])
def test_short_query_attention_equals_sdpa(mask_kind, q_len):
    """`attend`'s matmul path (decoding steps on CPU) computes what SDPA computes, for masks added
    within the score product (`per_head_mask` layout) and masks applied after it."""
    import torch.nn.functional as F

    from decoding.attend import attend, per_head_mask
    from models.attention import SHORT_QUERY

    assert q_len <= SHORT_QUERY
    g = torch.Generator().manual_seed(q_len)
    q, k, v = (torch.randn(3, 4, n, 8, generator=g) for n in (q_len, 21, 21))
    mask = None
    if mask_kind != "none":
        rows = 1 if mask_kind == "per_head_one_query_row" else q_len
        allowed = torch.rand(3, 1, rows, 21, generator=g) < 0.6
        allowed[..., 0] = True  # no fully masked row
        heads = 1 if mask_kind == "float_shared_by_heads" else 4
        mask = {
            "bool": allowed,
            "per_head_from_bool": per_head_mask(allowed, 3, 4),
            "per_head_one_query_row": per_head_mask(allowed, 3, 4),
        }.get(mask_kind, torch.randn(3, heads, rows, 21, generator=g).masked_fill(~allowed, float("-inf")))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(attend(q, k, v, mask, False, 0.0), expected, atol=1e-6, rtol=1e-5)


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_dropping_a_sentence_copies_only_the_positions_held():
    """The block is preallocated for the longest output a search allows, and its untouched pages
    cost no memory; dropping a finished sentence must not copy (and so touch) the unused capacity."""
    sentences, groups, heads, head_dim, layers = 8, 2, 4, 32, 2
    cache = DecoderCache(layers, capacity=8000)  # 2 x 2 x 8 x 4 x 8000 x 2 x 32 floats: 250 MB, 10 positions held
    with torch.no_grad():
        for step in range(10):
            cache.extend(sentences * groups, sentences, 1, step, torch.device("cpu"))
            for layer in range(layers):
                k = torch.randn(sentences * groups, heads, 1, head_dim)
                cache[layer]["self"].append(k, k)
        before = resident_mb()
        keep = torch.arange(1, sentences)
        cache.reorder((keep[:, None] * groups + torch.arange(groups)).view(-1), keep)
        grown_by = resident_mb() - before
    assert cache.kv.numel() * 4 / 2**20 > 200  # the new block (7 sentences) is as large as the old one ...
    assert grown_by < 40, f"dropping a sentence touched {grown_by:.0f} MB"  # ... but only the held part is written
