"""The search as it was before issue 47 (decoding/search.py at commit 7cb8f8f), frozen: the peer
the benchmarks compare today's search with in the same run (`benchmarks/decode.py` cases
`ours_*_legacy`). It reads the device every step (finished counts, `.nonzero().tolist()`) and drops
finished sentences at once; today's keeps its shapes between checks. Not used by the harness."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from decoding.hypotheses import Hypothesis, length_penalty
from decoding.search import EncoderState, Searchable, _continuations, _log_probs, _top_candidates, output_limits


def _ban_repeated_ngrams(logp: Tensor, tokens: Tensor, n: int) -> None:
    """Forbid tokens that would repeat an n-gram already in the row's prefix (in place).
    tokens: `[rows, len]` prefix (BOS first); logp: `[rows, vocab]`."""
    if n <= 0 or tokens.size(1) < n:
        return
    windows = tokens.unfold(1, n, 1)  # [rows, num_windows, n]
    prefix = tokens[:, tokens.size(1) - (n - 1) :] if n > 1 else tokens[:, :0]  # [rows, n - 1]
    match = (windows[:, :, : n - 1] == prefix[:, None, :]).all(dim=-1)  # [rows, num_windows]
    rows, cols = match.nonzero(as_tuple=True)
    logp[rows, windows[rows, cols, n - 1]] = float("-inf")


def _mask_specials(
    logp: Tensor, step: int, limits: Tensor, eos: int, banned: tuple[int, ...], min_len: int = 0
) -> Tensor:
    """Forbid banned ids (pad, bos) and EOS before `min_len`; allow only EOS for rows at their length
    limit (the limit wins over `min_len`: a row never runs past it, nor emits a banned id)."""
    logp[:, list(banned)] = float("-inf")
    at_limit = limits.le(step + 1)  # [rows]
    eos_logp = logp[at_limit, eos].clone() if at_limit.any() else None
    if step + 1 < min_len:
        logp[:, eos] = float("-inf")
    if eos_logp is not None:
        logp[at_limit] = float("-inf")
        logp[at_limit, eos] = eos_logp
    return logp


@torch.no_grad()
def greedy_search(
    model: Searchable,
    src: Tensor,
    bos: int,
    eos: int,
    pad: int,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    max_len_cap: Optional[int] = None,
    min_len: int = 0,
    no_repeat_ngram: int = 0,
) -> list[Hypothesis]:
    """Pick the most likely token at each step, for a batch `src` `[batch, src_len]`."""
    enc = model.encode(src)
    batch = src.size(0)
    limits = output_limits(enc.src_mask.sum(dim=1), max_len_a, max_len_b, max_len_cap)  # [batch]
    tokens = torch.full((batch, 1), bos, dtype=torch.long, device=src.device)  # [batch, 1]
    scores = torch.zeros(batch, device=src.device)
    lengths = torch.zeros(batch, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    cache = model.new_cache(capacity=int(limits.max()))
    banned = tuple(sorted({pad, bos} - {eos}))
    for step in range(int(limits.max())):
        logits = model.decode_step(tokens[:, -1:], enc, cache, offset=step)  # [batch, vocab]
        logp = _mask_specials(_log_probs(logits), step, limits, eos, banned, min_len)
        _ban_repeated_ngrams(logp, tokens, no_repeat_ngram)
        next_logp, next_tok = logp.max(dim=-1)  # [batch]
        next_tok = next_tok.masked_fill(finished, pad)
        scores += next_logp.masked_fill(finished, 0.0)
        lengths += (~finished).long()
        tokens = torch.cat([tokens, next_tok[:, None]], dim=1)  # [batch, step + 2]
        finished |= next_tok.eq(eos)
        if finished.all():
            break
    out = []
    for row, score, length in zip(tokens[:, 1:].tolist(), scores.tolist(), lengths.tolist()):
        seq = row[:length]
        if seq and seq[-1] == eos:
            seq = seq[:-1]
        out.append(Hypothesis(seq, score, score))
    return out


@torch.no_grad()
def beam_search(
    model: Searchable,
    src: Tensor,
    bos: int,
    eos: int,
    pad: int,
    beam_size: int = 5,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    penalty: str = "wu",
    alpha: float = 0.6,
    nbest: int = 1,
    max_len_cap: Optional[int] = None,
    min_len: int = 0,
    no_repeat_ngram: int = 0,
) -> list[list[Hypothesis]]:
    """Batched beam search; returns the `nbest` hypotheses per sentence, best first.

    Rows are laid out `[batch * beam]`. At each step the top `2 * beam` continuations of each
    sentence are taken; those ending in EOS among the top `beam` are finished (scored with the
    length penalty), and the best `beam` others continue. A sentence is done when it has `beam`
    finished hypotheses or reaches its length limit; done sentences leave the batch.
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest ({nbest}) must be between 1 and beam_size ({beam_size})")
    device = src.device
    batch, k = src.size(0), beam_size
    enc = model.encode(src)
    limits_all = output_limits(enc.src_mask.sum(dim=1), max_len_a, max_len_b, max_len_cap)  # [batch]
    # enc keeps one row per sentence: the decoder reads it once for the sentence's `beam` rows.
    active = torch.arange(batch, device=device)  # sentence id of each active group
    tokens = torch.full((batch * k, 1), bos, dtype=torch.long, device=device)  # [batch * beam, 1]
    beam_scores = torch.zeros(batch, k, device=device)
    beam_scores[:, 1:] = float("-inf")  # all beams start identical: expand only the first
    cache = model.new_cache(capacity=int(limits_all.max()))
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    banned = tuple(sorted({pad, bos} - {eos}))

    for step in range(int(limits_all.max())):
        # The first step decodes one row per sentence (its beams are all BOS); then one per beam.
        rows_per = 1 if step == 0 else k
        decoded = tokens if rows_per == k else tokens[::k]  # [n * rows_per, step + 1]
        limits = limits_all[active].repeat_interleave(rows_per)  # [n * rows_per]
        logp = _next_log_probs(model, decoded, enc, cache, step, limits, eos, banned, min_len, no_repeat_ngram)
        top = _top_candidates(logp, beam_scores, rows_per)
        _finish_eos_candidates(finished, active, tokens, top, eos, step, penalty, alpha)
        next_scores, next_beam, next_tok = _continuations(top, eos, k)

        done = torch.tensor([len(finished[int(s)]) >= k for s in active], device=device)
        done |= limits_all[active].le(step + 1) | next_scores[:, 0].isneginf()
        keep = (~done).nonzero().squeeze(1)  # [n_keep]
        if keep.numel() == 0:
            break
        rows = (keep[:, None] * k + next_beam[keep]).view(-1)  # [n_keep * beam] rows of the current batch
        tokens = torch.cat([tokens.index_select(0, rows), next_tok[keep].view(-1, 1)], dim=1)  # [n_keep * beam, +1]
        beam_scores = next_scores[keep]
        enc = _reorder(model, cache, enc, keep, rows, rows_per, k)
        active = active[keep]

    return [sorted(hyps, key=lambda h: h.normalized_score, reverse=True)[:nbest] for hyps in finished]


def _next_log_probs(
    model: Searchable,
    decoded: Tensor,
    enc,
    cache,
    step: int,
    limits: Tensor,
    eos: int,
    banned: tuple,
    min_len: int,
    no_repeat_ngram: int,
) -> Tensor:
    """Log-probabilities `[rows, vocab]` of the next token after `decoded`, with the special tokens
    masked (EOS forced at the limit, held back before min_len) and repeated n-grams banned."""
    logits = model.decode_step(decoded[:, -1:], enc, cache, offset=step)  # [rows, vocab]
    logp = _mask_specials(_log_probs(logits), step, limits, eos, banned, min_len)
    _ban_repeated_ngrams(logp, decoded, no_repeat_ngram)
    return logp


def _finish_eos_candidates(
    finished: list[list[Hypothesis]],
    active: Tensor,
    tokens: Tensor,
    top: tuple[Tensor, Tensor, Tensor],
    eos: int,
    step: int,
    penalty: str,
    alpha: float,
) -> None:
    """Finish the EOS candidates that rank among the top `beam` of their sentence (up to `beam`
    finished hypotheses per sentence). tokens: the beams' prefixes `[n * beam, step + 1]`."""
    top_scores, top_beam, top_tok = top
    k = tokens.size(0) // active.numel()
    for i, j in (top_tok[:, :k].eq(eos) & top_scores[:, :k].isfinite()).nonzero().tolist():
        sid = int(active[i])
        if len(finished[sid]) < k:
            seq = tokens[i * k + int(top_beam[i, j]), 1:].tolist()
            raw = float(top_scores[i, j])
            finished[sid].append(Hypothesis(seq, raw, float(length_penalty(raw, step + 1, penalty, alpha))))


def _reorder(
    model: Searchable, cache: Any, enc: EncoderState, keep: Tensor, rows: Tensor, rows_per: int, k: int
) -> EncoderState:
    """Reorder the cache for the continuing beams `rows` of the kept sentences `keep`; returns the
    encoder output of the kept sentences. Beams reordered within their sentences leave the
    cross-attention cache as it is; finished sentences leave the batch, with their encoder rows."""
    cache_rows = rows if rows_per == k else keep.repeat_interleave(k)  # rows of the decoded batch
    memory_index = keep if keep.numel() < enc.src_mask.size(0) else None
    model.reorder_cache(cache, cache_rows, memory_index, groups=None if rows_per == k else k)
    return enc if memory_index is None else enc.index_select(keep)
