"""The C attention kernel for CPU decoding steps (decoding/cpu_kernel.py, decoding/csrc/decode_attention.c)."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from helpers import (
    BOS,
    EOS,
    PAD,
    bos_prefixes,
    check_random_beam_steps,
    encoding_cases,
    give_bias_tables_a_signal,
    mixed_batch,
    tiny_model,
)

from decoding import cpu_kernel
from decoding.attend import attend, per_head_mask
from decoding.search import beam_search, greedy_search
from decoding.step import CachedDecoder

needs_avx2 = pytest.mark.skipif(not cpu_kernel.supported_cpu(), reason="the kernel is for x86-64 CPUs with AVX2")


def reference(q, k, v, mask, scale):
    """softmax(scale · q kᵀ + mask) v in float64."""
    scores = (q.double() @ k.double().transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores + mask.double()
    return (torch.softmax(scores, dim=-1) @ v.double()).float()


def inputs(batch, heads, q_len, k_len, head_dim, mask_kind, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, q_len, head_dim, generator=g)
    k, v = (torch.randn(batch, heads, k_len, head_dim, generator=g) for _ in range(2))
    mask = None
    if mask_kind == "padding":  # one row for all queries: source padding
        allowed = torch.arange(k_len)[None, :] < torch.randint(1, k_len + 1, (batch, 1), generator=g)
        mask = per_head_mask(allowed[:, None, None, :], batch, heads)  # [batch, heads, 1, k_len]
    elif mask_kind == "ancestry_bias":  # one row per query: beams' ancestors only, plus a per-head bias
        allowed = torch.rand(batch, 1, q_len, k_len, generator=g) < 0.25
        allowed[..., 0] = True
        bias = torch.randn(batch, heads, q_len, k_len, generator=g) * 3
        mask = bias.masked_fill(~allowed, float("-inf")).contiguous()
    return q, k, v, mask


@pytest.fixture
def kernel_built():
    assert cpu_kernel.available(), cpu_kernel.unavailable_reason()


def test_kernel_is_built_where_it_can_be():
    """On an x86-64 CPU with AVX2 and a C compiler the kernel must be there; elsewhere it says why not."""
    can = (
        cpu_kernel.supported_cpu()
        and os.environ.get(cpu_kernel.ENV_SWITCH, "1") != "0"
        and (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc"))
    )
    assert cpu_kernel.available() == bool(can), cpu_kernel.unavailable_reason()
    if not can:
        assert cpu_kernel.unavailable_reason()


@needs_avx2
@pytest.mark.parametrize("mask_kind", ["none", "padding", "ancestry_bias"])
@pytest.mark.parametrize("q_len, k_len", [(1, 1), (1, 37), (5, 8), (5, 250), (6, 17), (7, 9), (13, 64)])
@pytest.mark.parametrize("head_dim", [16, 64, 128])
def test_kernel_equals_reference(kernel_built, mask_kind, q_len, k_len, head_dim):
    q, k, v, mask = inputs(3, 2, q_len, k_len, head_dim, mask_kind, seed=q_len * 1000 + k_len)
    scale = head_dim**-0.5
    assert cpu_kernel.usable(q, k, v, mask)
    torch.testing.assert_close(
        cpu_kernel.attention(q, k, v, mask, scale), reference(q, k, v, mask, scale), atol=2e-6, rtol=1e-5
    )


@needs_avx2
def test_kernel_reads_strided_cache_views(kernel_built):
    """Keys/values as the decoder cache hands them over: views into a larger buffer
    `[sentences, heads, capacity, groups, head_dim]`, position-major then slot."""
    g = torch.Generator().manual_seed(3)
    buf_k, buf_v = (torch.randn(4, 2, 20, 5, 32, generator=g) for _ in range(2))
    k, v = buf_k[:, :, :11].flatten(2, 3), buf_v[:, :, :11].flatten(2, 3)  # [4, 2, 55, 32], not contiguous
    assert not k.is_contiguous()
    q = torch.randn(4, 2, 5, 32, generator=g)
    allowed = torch.rand(4, 1, 5, 55, generator=g) < 0.3
    allowed[..., :5] = True
    mask = torch.zeros(4, 2, 5, 55).masked_fill_(~allowed, float("-inf"))
    torch.testing.assert_close(
        cpu_kernel.attention(q, k, v, mask, 0.125),
        reference(q, k.contiguous(), v.contiguous(), mask, 0.125),
        atol=2e-6,
        rtol=1e-5,
    )


@needs_avx2
def test_kernel_extremes(kernel_built):
    """Masked positions weigh exactly nothing, huge score gaps underflow to zero weight, and a
    query that may attend to nothing gets NaN, as softmax gives."""
    q, k, v, _ = inputs(2, 2, 3, 12, 16, "none", seed=5)
    mask = torch.zeros(2, 2, 3, 12)
    mask[0, :, 0, 1:] = float("-inf")  # query 0 of row 0 sees key 0 only
    mask[0, :, 1] = float("-inf")  # query 1 of row 0 sees nothing
    mask[1, :, :, 3:] = -1e4  # far below the rest
    out = cpu_kernel.attention(q, k, v, mask, 0.25)
    torch.testing.assert_close(out[0, :, 0], v[0, :, 0])
    assert torch.isnan(out[0, :, 1]).all()
    assert not torch.isnan(out[0, :, 2]).any() and not torch.isnan(out[1]).any()
    torch.testing.assert_close(
        out[1], reference(q[1:], k[1:, :, :3], v[1:, :, :3], None, 0.25)[0], atol=2e-6, rtol=1e-5
    )


@pytest.mark.parametrize(
    "case",
    ["bf16", "grad", "head_dim_8", "bool_mask", "mask_shared_by_heads", "strided_head_dim", "mask_not_contiguous"],
)
def test_kernel_declines_what_it_does_not_handle(case):
    """Inputs outside the kernel's contract go to attend's matmul path, which still answers them."""
    q, k, v, mask = inputs(2, 2, 5, 9, 16, "ancestry_bias", seed=1)
    if case == "bf16":
        q, k, v, mask = q.bfloat16(), k.bfloat16(), v.bfloat16(), mask.bfloat16()
    elif case == "grad":
        q.requires_grad_(True)
    elif case == "head_dim_8":
        q, k, v, mask = inputs(2, 2, 5, 9, 8, "ancestry_bias", seed=1)
    elif case == "bool_mask":
        mask = mask.isfinite()
    elif case == "mask_shared_by_heads":
        mask = mask[:, :1].contiguous()
    elif case == "strided_head_dim":
        k = torch.randn(2, 2, 9, 32)[..., ::2]
    elif case == "mask_not_contiguous":
        mask = mask.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert not cpu_kernel.usable(q, k, v, mask)
    float_mask = per_head_mask(mask, 2, 2) if case == "bool_mask" else mask
    expected = reference(q.detach().float(), k.float(), v.float(), float_mask.float(), q.size(-1) ** -0.5)
    with torch.no_grad():
        got = attend(q, k, v, mask, False, 0.0).float()
    tolerance = dict(atol=3e-2, rtol=3e-2) if case == "bf16" else dict(atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(got, expected, **tolerance)


@needs_avx2
def test_attend_takes_the_kernel_and_matches_its_matmul_path(kernel_built, monkeypatch):
    q, k, v, mask = inputs(3, 4, 5, 40, 16, "ancestry_bias", seed=9)
    calls = []
    real = cpu_kernel.attention
    monkeypatch.setattr(cpu_kernel, "attention", lambda *a: calls.append(1) or real(*a))
    with_kernel = attend(q, k, v, mask, False, 0.0)
    assert calls == [1]
    monkeypatch.setitem(cpu_kernel._state, "lib", None)  # as if it could not be built
    without = attend(q, k, v, mask, False, 0.0)
    assert calls == [1]
    torch.testing.assert_close(with_kernel, without, atol=2e-6, rtol=1e-5)


def test_build_failure_falls_back_with_a_warning(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_kernel, "_state", {})
    monkeypatch.setattr(cpu_kernel, "supported_cpu", lambda: True)
    monkeypatch.setenv("PE_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", shutil.which("false") or "false")
    with pytest.warns(RuntimeWarning, match="could not be built"):
        assert not cpu_kernel.available()
    assert "failed" in cpu_kernel.unavailable_reason()
    assert list(tmp_path.iterdir()) == []  # no half-written library left behind
    q, k, v, mask = inputs(2, 2, 5, 9, 16, "ancestry_bias", seed=2)
    torch.testing.assert_close(attend(q, k, v, mask, False, 0.0), reference(q, k, v, mask, 0.25), atol=2e-6, rtol=1e-5)


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setattr(cpu_kernel, "_state", {})
    monkeypatch.setenv(cpu_kernel.ENV_SWITCH, "0")
    assert not cpu_kernel.available()
    assert cpu_kernel.ENV_SWITCH in cpu_kernel.unavailable_reason()


@needs_avx2
def test_build_goes_to_the_cache_directory_once(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_kernel, "_state", {})
    monkeypatch.setenv("PE_KERNEL_CACHE", str(tmp_path))
    assert cpu_kernel.available(), cpu_kernel.unavailable_reason()
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and built[0].suffix == ".so"
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setattr(cpu_kernel, "_state", {})
    assert cpu_kernel.available()
    assert list(tmp_path.iterdir()) == built and built[0].stat().st_mtime_ns == stamp  # reused, not rebuilt


# ------------------------------------------------------------ whole searches through the kernel


@needs_avx2
@pytest.mark.parametrize("name, options", encoding_cases())
def test_searches_through_the_kernel_match_the_matmul_path(kernel_built, monkeypatch, name, options):
    """Every encoding: cached decoding steps through the kernel give the teacher-forced logits,
    and beam / greedy search give the same hypotheses (and scores) with and without the kernel."""
    model = tiny_model(name, 4, heads=2, **options)  # head_dim 16: the kernel needs a multiple of 16
    decoder = CachedDecoder(model)
    src = mixed_batch([9, 4, 6], seed=4)
    calls = []
    real = cpu_kernel.attention
    monkeypatch.setattr(cpu_kernel, "attention", lambda *a: calls.append(1) or real(*a))
    tgt = bos_prefixes(3, 9, seed=5)
    with torch.no_grad():
        enc = decoder.encode(src)
        full = model.decode(tgt, model.encode(src))
        cache = decoder.new_cache()
        for step in range(tgt.size(1)):
            torch.testing.assert_close(
                decoder.decode_step(tgt[:, step : step + 1], enc, cache, offset=step), full[:, step], atol=1e-5, rtol=0
            )
    kw = dict(max_len_a=1.0, max_len_b=4)
    beams, greedy = (
        beam_search(decoder, src, BOS, EOS, PAD, beam_size=4, nbest=3, **kw),
        greedy_search(decoder, src, BOS, EOS, PAD, **kw),
    )
    assert calls, "the kernel was not used"
    monkeypatch.setitem(cpu_kernel._state, "lib", None)
    beams_ref, greedy_ref = (
        beam_search(decoder, src, BOS, EOS, PAD, beam_size=4, nbest=3, **kw),
        greedy_search(decoder, src, BOS, EOS, PAD, **kw),
    )
    assert [h.tokens for h in greedy] == [h.tokens for h in greedy_ref]
    assert [[h.tokens for h in n] for n in beams] == [[h.tokens for h in n] for n in beams_ref]
    for got, ref in zip(beams, beams_ref):
        assert [h.score for h in got] == pytest.approx([h.score for h in ref], abs=1e-4)


# ------------------------------------------------------------ beams reading only their ancestors


def ancestor_index(batch, q_len, positions, groups, seed):
    """Like DecoderCache.ancestor_keys: for each query one key per position, `position * groups + slot`."""
    g = torch.Generator().manual_seed(seed)
    slot = torch.randint(0, groups, (batch, q_len, positions), generator=g)
    return (slot + torch.arange(positions) * groups).to(torch.int32)


@needs_avx2
@pytest.mark.parametrize("mask_kind", ["none", "shared", "per_query"])
@pytest.mark.parametrize(
    "q_len, positions, groups", [(1, 1, 1), (5, 1, 5), (5, 3, 5), (5, 50, 5), (4, 9, 4), (6, 17, 3), (7, 40, 7)]
)
@pytest.mark.parametrize("head_dim", [16, 64, 128, 80])
def test_indexed_kernel_equals_reference(kernel_built, mask_kind, q_len, positions, groups, head_dim):
    """Each query attends to its indexed keys only: the same as the reference with -inf elsewhere."""
    batch, heads, k_len = 3, 2, positions * groups
    q, k, v, _ = inputs(batch, heads, q_len, k_len, head_dim, "none", seed=positions * 100 + q_len)
    index = ancestor_index(batch, q_len, positions, groups, seed=positions)
    mask = None
    if mask_kind != "none":  # a score bias (ALiBi-like), read at the indexed keys only
        rows = 1 if mask_kind == "shared" else q_len
        mask = (torch.randn(batch, heads, rows, k_len, generator=torch.Generator().manual_seed(7)) * 2).contiguous()
    allowed = torch.zeros(batch, 1, q_len, k_len, dtype=torch.bool).scatter_(-1, index[:, None].long(), True)
    full = torch.zeros(batch, heads, q_len, k_len).masked_fill(~allowed, float("-inf"))
    if mask is not None:
        full = full + mask
    scale = head_dim**-0.5
    torch.testing.assert_close(
        cpu_kernel.attention(q, k, v, mask, scale, index), reference(q, k, v, full, scale), atol=2e-6, rtol=1e-5
    )


@needs_avx2
def test_indexed_kernel_never_reads_other_keys(kernel_built):
    """Keys outside the index are never read: NaN there changes nothing."""
    q, k, v, _ = inputs(2, 2, 5, 30, 16, "none", seed=8)
    index = ancestor_index(2, 5, 6, 5, seed=8)
    expected = cpu_kernel.attention(q, k, v, None, 0.25, index)
    outside = torch.ones(2, 30, dtype=torch.bool)
    outside.scatter_(1, index.flatten(1).long(), False)
    k[outside[:, None, :, None].expand_as(k)] = float("nan")
    v[outside[:, None, :, None].expand_as(v)] = float("nan")
    assert torch.isnan(k).any()
    torch.testing.assert_close(cpu_kernel.attention(q, k, v, None, 0.25, index), expected, atol=0, rtol=0)


@needs_avx2
def test_indexed_kernel_rejects_a_bad_index(kernel_built):
    q, k, v, _ = inputs(2, 2, 5, 30, 16, "none", seed=1)
    index = ancestor_index(2, 5, 6, 5, seed=1)
    with pytest.raises(ValueError, match="int32"):
        cpu_kernel.attention(q, k, v, None, 0.25, index.long())
    with pytest.raises(ValueError, match=r"\[2, 5, n >= 1\]"):
        cpu_kernel.attention(q, k, v, None, 0.25, index[:, :4])
    index[1, 2, 3] = 30  # one past the last key
    with pytest.raises(RuntimeError, match="out of range"):
        cpu_kernel.attention(q, k, v, None, 0.25, index)


@pytest.mark.parametrize("path", ["kernel", "matmul", "sdpa"])
def test_attend_with_a_key_index_equals_the_mask_it_stands_for(path, monkeypatch):
    """`attend(key_index=...)` through the kernel, or turned into a mask on the other paths."""
    if path == "kernel" and not cpu_kernel.available():
        pytest.skip(f"kernel unavailable: {cpu_kernel.unavailable_reason()}")
    q, k, v, mask = inputs(3, 4, 5, 40, 16, "none", seed=9)
    bias = torch.randn(3, 4, 5, 40, generator=torch.Generator().manual_seed(9)).contiguous()
    index = ancestor_index(3, 5, 8, 5, seed=9)
    calls = []
    real = cpu_kernel.attention
    monkeypatch.setattr(cpu_kernel, "attention", lambda *a: calls.append(len(a)) or real(*a))
    if path != "kernel":
        monkeypatch.setitem(cpu_kernel._state, "lib", None)
    if path == "sdpa":
        monkeypatch.setattr("models.attention.SHORT_QUERY", 0)
    allowed = torch.zeros(3, 1, 5, 40, dtype=torch.bool).scatter_(-1, index[:, None].long(), True)
    for attn_mask in (None, bias):
        full = torch.zeros(3, 4, 5, 40).masked_fill(~allowed, float("-inf")) + (0 if attn_mask is None else attn_mask)
        with torch.no_grad():
            got = attend(q, k, v, attn_mask, False, 0.0, key_index=index)
        torch.testing.assert_close(got, reference(q, k, v, full, 0.25), atol=2e-6, rtol=1e-5)
    assert calls == ([6, 6] if path == "kernel" else [])  # the kernel got the index


@needs_avx2
@pytest.mark.parametrize("name, options", encoding_cases())
def test_beam_steps_through_the_ancestor_index_equal_histories_decoded_from_scratch(
    kernel_built, monkeypatch, name, options
):
    """3 sentences x 4 beams, 7 steps of random beam reorders (a sentence leaves at step 4): every
    cached step, with each beam reading only its ancestors' keys, equals decoding each row's history
    from scratch; and a whole beam search is the same with the index as with the ancestry mask."""
    model = give_bias_tables_a_signal(tiny_model(name, 11, heads=2, **options), seed=11)
    indexed = []
    real = cpu_kernel.attention
    monkeypatch.setattr(
        cpu_kernel, "attention", lambda *a: indexed.append(len(a) == 6 and a[5] is not None) or real(*a)
    )
    check_random_beam_steps(model, f"{name} {options}")
    assert any(indexed), "no step went through the ancestor index"
    src = mixed_batch([6, 3, 8], seed=12)
    kw = dict(max_len_a=1.0, max_len_b=5, beam_size=4, nbest=4)
    with_index = beam_search(CachedDecoder(model), src, BOS, EOS, PAD, **kw)
    monkeypatch.setattr("decoding.attend.ancestor_index_path", lambda *a: False)  # plan: mask, not index
    with_mask = beam_search(CachedDecoder(model), src, BOS, EOS, PAD, **kw)
    assert [[h.tokens for h in n] for n in with_index] == [[h.tokens for h in n] for n in with_mask]
    for got, ref in zip(with_index, with_mask):
        assert [h.score for h in got] == pytest.approx([h.score for h in ref], abs=1e-4)
