"""Greedy and beam search: pure functions over a `Searchable`'s `encode()` and `decode_step()`.

Both are batched and use the decoder's key/value cache. Scores are sums of token
log-probabilities; beam search ranks finished hypotheses with a length penalty and keeps them
per sentence on the device (`FinishedHypotheses`). A step reads nothing back to the host and
keeps its shapes: finished rows and sentences are masked, not dropped, and whether the search is
over is read at a check, every `CHECK_EVERY` steps on an accelerator and every step on a CPU
(`check_interval`), where finished sentences also leave the batch (beam search). The output
length is capped at `max_len_a * src_len + max_len_b` tokens (EOS included; and at `max_len_cap`,
e.g. a learnable encoding's table size), where only EOS
is allowed at the last step, identically in both searches, so beam size 1 equals greedy.
`min_len` forbids EOS before that many tokens; `no_repeat_ngram` forbids repeating an n-gram.
A trained model is searched through `decoding.step.CachedDecoder(model)` (the key/value cache and
the CPU shortcuts); `decoding.full_prefix.FullPrefixDecoder(model)` runs the model's plain `decode()` on the whole
prefix every step instead (no cache). A `decode_step()` must return new logits at every call: the
searches turn them into log-probabilities in place.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

import torch
from torch import Tensor

from decoding.hypotheses import BeamHistory, FinishedHypotheses, Hypothesis


class EncoderState(Protocol):
    """What the searches read from a model's encoder output (`EncoderOutput`)."""

    src_mask: Tensor  # [batch, src_len], True at real tokens (output length limits)

    def index_select(self, index: Tensor) -> "EncoderState":
        """The rows `index` `[rows]` (sentences that are still being searched)."""


class Searchable(Protocol):
    """What the searches need from a model (`decoding.step.CachedDecoder`, `FullPrefixDecoder`, or a
    model of your own): encode a batch once, then extend hypotheses one token per step."""

    def encode(self, src: Tensor) -> EncoderState:
        """Encoder output for `src` `[batch, src_len]` (passed back to `decode_step`)."""

    def new_cache(self, capacity: Optional[int] = None) -> Any:
        """An empty decoder cache for up to `capacity` steps."""

    def decode_step(self, tokens: Tensor, enc: EncoderState, cache: Any, offset: int) -> Tensor:
        """Logits `[rows, vocab]` for the next token after `tokens` `[rows, 1]` at position `offset`
        (new logits at every call: the searches write into them)."""

    def reorder_cache(
        self, cache: Any, index: Tensor, memory_index: Optional[Tensor] = None, groups: Optional[int] = None
    ) -> None:
        """Keep the cache rows of `index` (rows of encoder memory: `memory_index`; `groups` beams per
        sentence)."""

    def reorder_beams(self, cache: Any, parents: Tensor) -> None:
        """Reorder the beams within each sentence: row g of sentence s continues its row
        `parents[s, g]` (`[sentences, beams]`); no sentence leaves, nothing is read back."""


def output_limits(src_lens: Tensor, max_len_a: float, max_len_b: int, max_len_cap: Optional[int]) -> Tensor:
    """Each sentence's output limit in tokens, EOS included: `max_len_a * src_len + max_len_b` (in
    float32, as every backend computes it), at least 1, at most `max_len_cap`. src_lens: `[batch]`."""
    return (src_lens.float() * max_len_a + max_len_b).long().clamp(min=1, max=max_len_cap)


def _ban_repeated_ngrams(logp: Tensor, tokens: Tensor, n: int) -> None:
    """Forbid tokens that would repeat an n-gram already in the row's prefix (in place).
    tokens: `[rows, len]` prefix (BOS first); logp: `[rows, vocab]`."""
    if n <= 0 or tokens.size(1) < n:
        return
    windows = tokens.unfold(1, n, 1)  # [rows, num_windows, n]
    prefix = tokens[:, tokens.size(1) - (n - 1) :] if n > 1 else tokens[:, :0]  # [rows, n - 1]
    match = (windows[:, :, : n - 1] == prefix[:, None, :]).all(dim=-1)  # [rows, num_windows]
    # the tokens that would end a matching window, counted per row (a scatter: no data-dependent shape)
    hits = torch.zeros(logp.shape, dtype=torch.int32, device=logp.device)
    hits.scatter_add_(1, windows[:, :, n - 1], match.to(torch.int32))
    logp.masked_fill_(hits.gt(0), float("-inf"))


def _log_probs(logits: Tensor) -> Tensor:
    """Log-probabilities `[rows, vocab]` in fp32, computed in place in the step's logits (which the
    search owns): no new 8k-wide tensor per step. Logits in the feature-major layout of
    `decoding.linear.linear` are first made row-major (a blocked transpose copy), since softmax and
    top-k over a row are several times slower on a strided row."""
    logits = logits.float().contiguous()
    return torch.log_softmax(logits, dim=-1, out=logits)


def _mask_specials(
    logp: Tensor, step: int, limits: Tensor, eos: int, banned: tuple[int, ...], min_len: int = 0
) -> Tensor:
    """Forbid banned ids (pad, bos) and EOS before `min_len`; allow only EOS for rows at their length
    limit (the limit wins over `min_len`: a row never runs past it, nor emits a banned id). Masks,
    never a test of whether any row is at its limit (a read back to the host)."""
    logp[:, list(banned)] = float("-inf")
    at_limit = limits.le(step + 1)  # [rows]
    eos_logp = logp[:, eos].clone()
    if step + 1 < min_len:
        logp[:, eos] = float("-inf")
    logp.masked_fill_(at_limit[:, None], float("-inf"))
    logp[:, eos] = torch.where(at_limit, eos_logp, logp[:, eos])
    return logp


CHECK_EVERY = 8  # steps between the searches' reads of whether they are over, on an accelerator


def check_interval(device: torch.device, check_every: Optional[int]) -> int:
    """Steps between checks: `check_every` if given; else every step on a CPU, where a read costs
    nothing and done sentences leaving at once saves their compute (a test set's beam 4 runs ~30%
    longer when they stay 8 steps), and CHECK_EVERY on an accelerator, where each read waits for it."""
    if check_every is not None:
        return check_every
    return 1 if device.type == "cpu" else CHECK_EVERY


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
    check_every: Optional[int] = None,
) -> list[Hypothesis]:
    """Pick the most likely token at each step, for a batch `src` `[batch, src_len]` (checks: `check_interval`)."""
    enc = model.encode(src)
    batch = src.size(0)
    limits = output_limits(enc.src_mask.sum(dim=1), max_len_a, max_len_b, max_len_cap)  # [batch]
    steps = int(limits.max())  # (the loop's bound: read once)
    tokens = _prefixes(batch, steps, bos, pad, src.device)  # [batch, steps + 1]
    scores, lengths = torch.zeros(batch, device=src.device), torch.zeros(batch, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    cache = model.new_cache(capacity=steps)
    banned = tuple(sorted({pad, bos} - {eos}))
    every = check_interval(src.device, check_every)
    for step in range(steps):
        logits = model.decode_step(tokens[:, step : step + 1], enc, cache, offset=step)  # [batch, vocab]
        logp = _mask_specials(_log_probs(logits), step, limits, eos, banned, min_len)
        _ban_repeated_ngrams(logp, tokens[:, : step + 1], no_repeat_ngram)
        next_logp, next_tok = logp.max(dim=-1)  # [batch]
        next_tok = next_tok.masked_fill(finished, pad)
        scores += next_logp.masked_fill(finished, 0.0)
        lengths += (~finished).long()
        tokens[:, step + 1] = next_tok
        finished |= next_tok.eq(eos)
        if (step + 1) % every == 0 and bool(finished.all()):  # the one read, at a check
            break
    return _greedy_hypotheses(tokens, scores, lengths, eos)


def _prefixes(rows: int, steps: int, bos: int, pad: int, device: torch.device) -> Tensor:
    """The rows' token buffer `[rows, steps + 1]`: BOS, then pad until the search writes each step."""
    tokens = torch.full((rows, steps + 1), pad, dtype=torch.long, device=device)
    tokens[:, 0] = bos
    return tokens


def _greedy_hypotheses(tokens: Tensor, scores: Tensor, lengths: Tensor, eos: int) -> list[Hypothesis]:
    """Each row's hypothesis (its first `lengths` tokens after BOS, EOS dropped), read back once."""
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
    check_every: Optional[int] = None,
) -> list[list[Hypothesis]]:
    """Batched beam search; returns the `nbest` hypotheses per sentence, best first. Rows are laid
    out `[batch * beam]`. At each step the top `2 * beam` continuations of each sentence are taken;
    those ending in EOS among the top `beam` are finished (`FinishedHypotheses`), the best `beam`
    others continue (`BeamHistory`). A sentence is done when it has `beam` finished hypotheses or
    reaches its length limit; its beams are dead (-inf) until the next check (`check_interval`),
    where done sentences leave the batch."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest ({nbest}) must be between 1 and beam_size ({beam_size})")
    device, batch, k = src.device, src.size(0), beam_size
    enc = model.encode(src)
    limits = output_limits(enc.src_mask.sum(dim=1), max_len_a, max_len_b, max_len_cap)  # [batch]
    steps = int(limits.max())  # (the loop's bound: read once)
    active = torch.arange(batch, device=device)  # sentence of each group of rows (enc: one row per sentence)
    last = torch.full((batch, 1), bos, dtype=torch.long, device=device)  # each row's newest token
    # whole prefixes only where a step reads them (the n-gram ban); else the history keeps them
    prefixes = _prefixes(batch * k, steps, bos, pad, device) if no_repeat_ngram > 0 else None
    beam_scores = torch.zeros(batch, k, device=device)
    beam_scores[:, 1:] = float("-inf")  # all beams start identical: expand only the first
    cache, history = model.new_cache(capacity=steps), BeamHistory(batch, k, steps, device)
    found, done = FinishedHypotheses(batch, k, device), torch.zeros(batch, dtype=torch.bool, device=device)
    banned, every = tuple(sorted({pad, bos} - {eos})), check_interval(device, check_every)
    for step in range(steps):
        # The first step decodes one row per sentence (its beams are all BOS); then one per beam.
        rows_per = 1 if step == 0 else k
        step_limits = limits[active].repeat_interleave(rows_per)  # [n * rows_per]
        logits = model.decode_step(last, enc, cache, offset=step)  # [n * rows_per, vocab]
        logp = _mask_specials(_log_probs(logits), step, step_limits, eos, banned, min_len)
        if prefixes is not None:  # [n * beam, steps + 1]: one row per sentence at the first step
            _ban_repeated_ngrams(logp, prefixes[:: prefixes.size(0) // logp.size(0), : step + 1], no_repeat_ngram)
        top = _top_candidates(logp, beam_scores, rows_per)
        found.add(active, top, done, eos, step, penalty, alpha)
        next_scores, next_beam, next_tok = _continuations(top, eos, k)
        done = done | found.count[active].ge(k) | limits[active].le(step + 1) | next_scores[:, 0].isneginf()
        beam_scores = next_scores.masked_fill(done[:, None], float("-inf"))  # a done sentence's beams are dead
        last, prefixes = _advance(model, cache, history, active, next_beam, next_tok, step, prefixes)
        if (step + 1) % every == 0:  # the one read, at a check
            keep = (~done).nonzero().squeeze(1)  # [n_keep]
            if keep.numel() == 0:
                break
            if _leaves(model, keep.numel(), active.numel()):  # done sentences leave the batch
                enc, last, beam_scores, prefixes = _leave(model, cache, enc, keep, last, beam_scores, prefixes)
                active, done = active[keep], done[keep]
    return found.best(nbest, history)


def _leaves(model: Searchable, kept: int, active: int) -> bool:
    """Whether done sentences leave the batch at a check: as soon as any is done; for a model that
    prefers fixed shapes (a captured step per batch shape, decoding/fixed_shape.py), once at most
    half remain (until then their rows stay, masked: what the search finds is the same)."""
    if getattr(model, "prefers_fixed_shapes", False):
        return kept <= active // 2
    return kept < active


def _top_candidates(logp: Tensor, beam_scores: Tensor, rows_per: int) -> tuple[Tensor, Tensor, Tensor]:
    """The top `2 * beam` continuations of each sentence, from the step's log-probabilities `logp`
    `[n * rows_per, vocab]` and the beams' scores `[n, beam]`: their scores, the beam each extends and
    its token, each `[n, 2 * beam]`."""
    n, k = beam_scores.shape
    vocab = logp.size(-1)
    if rows_per == k:  # add each beam's score in place (logp is not needed afterwards)
        cand = logp.view(n, k, vocab).add_(beam_scores[:, :, None]).view(n, k * vocab)  # [n, beam * vocab]
    else:
        cand = (beam_scores[:, :, None] + logp.view(n, rows_per, vocab)).view(n, k * vocab)
    top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=1)  # [n, 2 * beam]
    return top_scores, top_idx // vocab, top_idx % vocab


def _continuations(top: tuple[Tensor, Tensor, Tensor], eos: int, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The best `k` non-EOS candidates of each sentence: scores, beams and tokens `[n, k]`. A slot that
    still holds an EOS (or an impossible) candidate is a dead beam, -inf, never extended."""
    top_scores, top_beam, top_tok = top
    is_eos = top_tok.eq(eos) | top_scores.isneginf()
    cand_order = torch.arange(is_eos.size(1), device=is_eos.device)
    order = (is_eos.long() * (2 * k) + cand_order).argsort(dim=1)[:, :k]  # [n, k]
    next_scores = top_scores.gather(1, order).masked_fill(is_eos.gather(1, order), float("-inf"))
    return next_scores, top_beam.gather(1, order), top_tok.gather(1, order)


def _advance(
    model: Searchable,
    cache: Any,
    history: BeamHistory,
    active: Tensor,
    next_beam: Tensor,
    next_tok: Tensor,
    step: int,
    prefixes: Optional[Tensor],
) -> tuple[Tensor, Optional[Tensor]]:
    """The beams continue `next_beam` `[n, beam]` with `next_tok`: recorded in the history, followed by
    the cache (after the first step, where each sentence had one row, it gets `beam` rows) and the
    whole prefixes if kept. Returns the rows' newest tokens `[n * beam, 1]` and the prefixes."""
    n, k = next_beam.shape
    history.record(active, step, next_beam, next_tok)
    if step == 0:
        model.reorder_cache(cache, torch.arange(n, device=next_beam.device).repeat_interleave(k), None, groups=k)
    else:
        model.reorder_beams(cache, next_beam)
    if prefixes is not None:
        prefixes = _extend(prefixes, next_beam, next_tok, step)
    return next_tok.view(-1, 1), prefixes


def _leave(
    model: Searchable, cache: Any, enc: EncoderState, keep: Tensor, last: Tensor, scores: Tensor, prefixes
) -> tuple[EncoderState, Tensor, Tensor, Optional[Tensor]]:
    """Only the sentences `keep` `[n_keep]` stay: their encoder rows, cache rows, newest tokens, beam
    scores and prefixes (at a check: the one place the batch changes shape)."""
    rows = _rows_of(keep, scores.size(1))  # [n_keep * beam]
    model.reorder_cache(cache, rows, keep)
    prefixes = prefixes.index_select(0, rows) if prefixes is not None else None
    return enc.index_select(keep), last.index_select(0, rows), scores[keep], prefixes


def _extend(prefixes: Tensor, next_beam: Tensor, next_tok: Tensor, step: int) -> Tensor:
    """The beams' whole prefixes `[n * beam, steps + 1]` continued: each row takes its parent's and its
    token at `step + 1` (kept only for the n-gram ban)."""
    prefixes = prefixes.index_select(0, _rows_of(torch.arange(next_beam.size(0), device=next_beam.device), next_beam))
    prefixes[:, step + 1] = next_tok.view(-1)
    return prefixes


def _rows_of(sentences: Tensor, beams: Tensor | int) -> Tensor:
    """The rows `[n * beam]` of `sentences` `[n]`: all `beams` of each (an int), or one per entry of
    `beams` `[n, beam]`."""
    if isinstance(beams, int):
        beams = torch.arange(beams, device=sentences.device).expand(sentences.numel(), beams)
    return (sentences[:, None] * beams.size(1) + beams).reshape(-1)
