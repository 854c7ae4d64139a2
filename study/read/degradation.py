"""The length study's headline measure: how much worse a model predicts a test pair's reference when
the pair sits inside a joined input than when it is scored alone, the same tokens on both sides.

test.py writes, per test pair and k, the sums of the pair's target tokens after its first (EOS
excluded) under teacher forcing (evaluation/teacher_forced.py: TEACHER_FORCED_PAIRS): alone (k = 1) and inside
the input of k joined pairs that holds it, with the position where its target starts there. A
pair's degradation at k is its NLL inside the join minus its NLL alone (EOS renormalised out), per
token. A pair counts at k only when every one of those tokens was scored there (a joined target cut
at the decoder's limit is left out). Pooled over k, the unit is the test pair, carrying every input
that contains it: per pair, (sum over k of NLL joined - NLL alone, sum over k of tokens).

What it still mixes: the joined input's source is longer, and the preceding sentences are context
the pair alone did not have; the measure moves with both, not only with the positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from study.read.run_stats import joined_training_k, retest_hint, stats, test_folder
from study.records import RunRecord, Stats, frozen_map
from study.terms import ALL_K, Span, SpanKind
from utils.run_files import TEACHER_FORCED_PAIRS as PAIRS_FILE
from utils.run_files import TSV_HEADERS
from utils.stored_files import read_lines


@dataclass
class PairSums:
    """One run's per-pair rows: alone[pair] = (tokens, NLL); joined[k] = arrays pair, start, tokens, NLL."""

    alone_tokens: np.ndarray  # [pairs]
    alone_nll: np.ndarray
    joined: Mapping[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    training_length: Optional[int]
    position_buckets: list[int]
    beyond: np.ndarray  # [pairs, 2]: NLL (EOS renormalised out) and tokens at positions >= the training length, all k

    @property
    def num_pairs(self) -> int:
        return len(self.alone_tokens)

    def scored(self, k: int) -> np.ndarray:
        """[pairs] bool: the pairs whose every token after the first was scored inside the join at k."""
        pair, _, tokens, _ = self.joined[k]
        out = np.zeros(self.num_pairs, dtype=bool)
        out[pair] = (tokens == self.alone_tokens[pair]) & (tokens > 0)
        return out

    def units(
        self, keep: Callable[[int, np.ndarray], np.ndarray], allowed: Optional[Mapping[int, np.ndarray]] = None
    ) -> np.ndarray:
        """[pairs, 2]: per test pair, (sum of NLL joined - NLL alone, sum of tokens) over the k and start
        positions `keep(k, starts)` selects, among the pairs `allowed[k]` (default: those this run scored
        whole at k; a comparison passes those every run of it scored whole: both sides, the same tokens)."""
        out = np.zeros((self.num_pairs, 2))
        for k, (pair, start, tokens, nll) in self.joined.items():
            cells = allowed.get(k) if allowed is not None else self.scored(k)
            if cells is None:  # a k some run of the comparison did not score
                continue
            same = cells[pair] & keep(k, start)
            p = pair[same]
            np.add.at(out[:, 0], p, nll[same] - self.alone_nll[p])
            np.add.at(out[:, 1], p, tokens[same])
        return out


def read_pair_sums(run: RunRecord) -> Optional[PairSums]:
    """A run's PAIRS_FILE, or None when its test did not write one."""
    path = test_folder(run) / PAIRS_FILE
    lines = read_lines(path)
    if lines is None:
        return None
    if not lines or lines[0] != TSV_HEADERS[PAIRS_FILE]:
        raise ValueError(f"{path} is damaged (header {TSV_HEADERS[PAIRS_FILE]!r} expected); {retest_hint(path)}")
    try:
        rows = np.array([[float(x) for x in line.split("\t")] for line in lines[1:]]).reshape(-1, 8)
    except ValueError:
        raise ValueError(
            f"{path} is damaged (8 tab-separated numbers per line expected); {retest_hint(path)}"
        ) from None
    check_pair_rows(rows, path, run)
    ks = rows[:, 0].astype(int)
    pairs = rows[:, 1].astype(int)
    size = int(pairs.max()) + 1 if len(pairs) else 0
    alone_tokens, alone_nll = np.zeros(size), np.zeros(size)
    one = ks == 1
    alone_tokens[pairs[one]], alone_nll[pairs[one]] = rows[one, 3], rows[one, 5]
    joined = {
        int(k): (pairs[ks == k], rows[ks == k, 2], rows[ks == k, 3], rows[ks == k, 5])
        for k in sorted(set(ks.tolist()) - {1})
    }
    beyond = np.zeros((size, 2))
    np.add.at(beyond[:, 0], pairs, rows[:, 7])
    np.add.at(beyond[:, 1], pairs, rows[:, 6])
    tf = run.teacher_forced
    length, buckets = (tf.training_length, list(tf.position_buckets)) if tf else (None, [])
    return PairSums(alone_tokens, alone_nll, joined, length, buckets, beyond)


def check_pair_rows(rows: np.ndarray, path, run: RunRecord) -> None:
    """The per-pair sums are what test.py wrote (every k scores.json scored: a file cut at a line
    boundary loses whole k), or refused naming the file and line."""
    bad = ~np.isfinite(rows).all(1)
    counts = rows[:, [0, 1, 2, 3, 6]]
    bad |= ((counts < 0) | (counts != np.round(counts))).any(1) | (rows[:, [4, 5, 7]] < 0).any(1)
    if bad.any():
        line = int(np.argmax(bad)) + 2  # the header is line 1
        raise ValueError(
            f"{path}:{line} is damaged (a count that is not a whole number >= 0, or an NLL that is negative "
            f"or not finite); {retest_hint(path)}"
        )
    alone = np.sort(rows[rows[:, 0] == 1, 1])
    if len(alone) and not np.array_equal(alone, np.arange(len(alone))):
        raise ValueError(f"{path} is damaged (not every test pair is scored alone once, k = 1); {retest_hint(path)}")
    scored = {int(k) for k in run.concat if int(k) > 1}
    missing = sorted(scored - set(rows[:, 0].astype(int).tolist()))
    if missing:
        raise ValueError(
            f"{path} is damaged: it holds no line for k = {', '.join(map(str, missing))}, which scores.json "
            f"scored (a file cut short?); {retest_hint(path)}"
        )


def selections(
    sums: PairSums, buckets: bool = False, joined_k: int = 1
) -> list[tuple[Span, Callable[[int, np.ndarray], np.ndarray], bool]]:
    """(span, keep, needs the same training length) of every degradation row: pooled over k first
    (the headline), then over the k beyond a joined-pair training of `joined_k` pairs, each k, and by
    where the target starts (within or beyond training; with `buckets`, per position bucket)."""
    out: list = [(ALL_K, lambda k, s: np.ones(len(s), bool), False)]
    if joined_k > 1 and any(k > joined_k for k in sums.joined):
        beyond = Span(SpanKind.BEYOND_JOINED, joined_k)
        out.append((beyond, lambda k, s: np.full(len(s), k > joined_k), False))
    at_k = lambda at: lambda k, s: np.full(len(s), k == at)
    out += [(Span(SpanKind.AT_K, k), at_k(k), False) for k in sorted(sums.joined)]
    length = sums.training_length
    if length:
        out += [
            (Span(SpanKind.START_WITHIN), lambda k, s: s < length, True),
            (Span(SpanKind.START_BEYOND), lambda k, s: s >= length, True),
        ]
    edges = sums.position_buckets if buckets else []
    starts = lambda lo, hi: lambda k, s: (s >= lo) & (s < hi if hi is not None else True)
    out += [
        (Span(SpanKind.START_BUCKET, start=bounds), starts(*bounds), False) for bounds in zip(edges, [*edges[1:], None])
    ]
    return out


def pooled(units: np.ndarray) -> Optional[float]:
    """Token-weighted degradation (nats per token) of per-pair units; None without tokens."""
    tokens = units[:, 1].sum()
    return float(units[:, 0].sum() / tokens) if tokens > 0 else None


ALONE = "NLL alone"  # a run's own k = 1 quality on the same tokens (per run only, beside its spans: no column)


def run_degradation(run: RunRecord) -> Optional[Mapping[Span | str, float]]:
    """A run's pooled degradation per selection and its NLL alone (ALONE), None without PAIRS_FILE."""
    sums = read_pair_sums(run)
    if sums is None:
        return None
    out = {}
    for span, keep, _ in selections(sums, buckets=True, joined_k=joined_training_k(run)):
        value = pooled(sums.units(keep))
        if value is not None:
            out[span] = value
    if sums.alone_tokens.sum() > 0:
        out[ALONE] = float(sums.alone_nll.sum() / sums.alone_tokens.sum())
    return frozen_map(out)


def degradation_stats(per_run: Sequence[Optional[Mapping[Span | str, float]]]) -> Mapping[Span, Stats]:
    """Each selection's `stats` over a configuration's runs (`run_degradation` of each)."""
    have = [d for d in per_run if d]
    if not have:
        return frozen_map({})
    spans = list(dict.fromkeys(span for d in have for span in d if span != ALONE))
    return frozen_map((span, stats([d.get(span) for d in have])) for span in spans)
