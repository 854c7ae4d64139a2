"""Paired bootstrap significance test of sacreBLEU, vectorized and extended to several seeds.

For one system pair it returns exactly the p-value of sacreBLEU 2.6's own paired bootstrap
(``PairedTest(..., test_type="bs")``, default ``SACREBLEU_SEED`` 12345): the same index draws,
the same float32 score arithmetic, the same statistic (Koehn 2004 as in Moses' script: mean-centred
absolute resampled differences against the observed one, with the +1 correction). Instead of
scoring every resample in Python, a resample's summed statistics are one row of ``counts @ stats``.

With several training seeds the test is one combined test: every seed's system and baseline are
resampled with the SAME sentence indices, and the statistic is the mean over seeds of the
per-seed BLEU differences (seed variation is averaged out instead of testing each seed alone).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

DEFAULT_SEED = 12345  # sacreBLEU's SACREBLEU_SEED default
MAX_ORDER = 4  # BLEU-4: stats are [sys_len, ref_len, correct_1..4, total_1..4]
_LOG_OF_ZERO = -9999999999.0  # sacrebleu.utils.my_log(0)
_COUNTS_CACHE: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
_COUNTS_CACHE_SIZE = 4

# numpy's SIMD exp/log (AVX-512) differ from libm by one ulp on a few percent of inputs, and
# sacreBLEU calls math.exp/math.log: these element-wise wrappers keep the scores bit-identical.
_math_exp = np.frompyfunc(math.exp, 1, 1)
_math_log = np.frompyfunc(math.log, 1, 1)


def sentence_stats(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """Per-sentence BLEU sufficient statistics, [n, 10] float64 (default BLEU(): 13a, exp, cased)."""
    from sacrebleu.metrics import BLEU

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    stats = BLEU()._extract_corpus_statistics(list(hypotheses), [list(references)])
    return np.asarray(stats, dtype=np.float64).reshape(len(hypotheses), 2 + 2 * MAX_ORDER)


def bleu_from_stats(totals: np.ndarray, *, float32: bool = True) -> np.ndarray:
    """BLEU score(s) [...] of summed statistics [..., 10], as BLEU()._compute_score_from_stats does.

    float32=True (default) reproduces the bootstrap resamples of ``_paired_bs_test``: sacreBLEU
    holds the statistics in float32 arrays there, so the n-gram precisions are float32 arithmetic
    (NumPy 2 keeps ``100. * np.float32`` in float32). float32=False reproduces the observed corpus
    score, computed from Python ints, hence float64 precisions.
    """
    dtype = np.float32 if float32 else np.float64
    t = np.asarray(totals, dtype=dtype)
    if t.shape[-1:] != (2 + 2 * MAX_ORDER,):
        raise ValueError(f"expected statistics [..., {2 + 2 * MAX_ORDER}], got {t.shape}")
    sys_len = np.trunc(t[..., 0].astype(np.float64))  # int(stats[0]) in sacreBLEU
    ref_len = np.trunc(t[..., 1].astype(np.float64))
    correct, total = t[..., 2 : 2 + MAX_ORDER], t[..., 2 + MAX_ORDER :]

    # Brevity penalty: exp(1 - r/c) when shorter than the reference, 0 for an empty output.
    bp = np.ones(t.shape[:-1])
    short = (sys_len < ref_len) & (sys_len > 0)
    bp[short] = _math_exp(1.0 - ref_len[short] / sys_len[short]).astype(np.float64)
    bp[(sys_len < ref_len) & (sys_len == 0)] = 0.0

    # A row scores 0 without any match, and also when some order has no n-grams: sacreBLEU then
    # breaks out of the loop and the remaining precisions stay 0, whose log is -9999999999.
    alive = np.any(correct != 0, axis=-1) & np.all(total != 0, axis=-1)
    c, tt = correct[alive], total[alive]
    hundred = dtype(100.0)
    smooth = np.ones(c.shape[0], dtype=dtype)  # exp smoothing: 1/2^k for the k-th zero order
    log_sum = np.zeros(c.shape[0])
    for k in range(MAX_ORDER):
        zero = c[:, k] == 0
        smooth[zero] *= 2
        prec = np.where(zero, hundred / (smooth * tt[:, k]), hundred * c[:, k] / tt[:, k])
        # Python's sum adds the logs left to right; so do we (np.sum might pair them).
        log_sum = log_sum + _math_log(prec.astype(np.float64)).astype(np.float64)
    scores = np.zeros(t.shape[:-1])
    scores[alive] = bp[alive] * _math_exp(log_sum / MAX_ORDER).astype(np.float64)
    return scores


def resample_counts(n: int, n_samples: int, seed: int = DEFAULT_SEED) -> np.ndarray:
    """[n_samples, n] float32: how often each sentence is drawn in each bootstrap resample.

    Built from exactly sacreBLEU's draws, ``default_rng(seed).choice(n, (n_samples, n))``, so that
    ``counts @ stats`` equals its per-resample sums. The last few results are memoised (read-only)
    because a report asks for the same (n, n_samples, seed) for every system and bucket.
    """
    key = (int(n), int(n_samples), int(seed))
    if key in _COUNTS_CACHE:
        _COUNTS_CACHE.move_to_end(key)
        return _COUNTS_CACHE[key]
    idx = np.random.default_rng(key[2]).choice(key[0], size=(key[1], key[0]), replace=True)
    counts = np.empty((key[1], key[0]), dtype=np.float32)
    chunk = max(1, (1 << 18) // max(key[0], 1))  # a block of rows at a time: small, cache-warm buffers
    for start in range(0, key[1], chunk):
        block = idx[start : start + chunk]
        flat = (block + key[0] * np.arange(block.shape[0])[:, None]).ravel()
        counts[start : start + block.shape[0]] = np.bincount(flat, minlength=block.size).reshape(block.shape)
    counts.flags.writeable = False
    _COUNTS_CACHE[key] = counts
    while len(_COUNTS_CACHE) > _COUNTS_CACHE_SIZE:
        _COUNTS_CACHE.popitem(last=False)
    return counts


@dataclass
class BootstrapResult:
    p_value: float
    difference: float  # observed mean over seeds of system BLEU minus baseline BLEU
    per_seed: list[float]  # observed per-seed differences
    n_samples: int
    # variance of the mean difference over seeds across the resamples (the same resampled sentences
    # for every seed): the test set's share of its uncertainty (study/stats/seed_test.py: v_sent)
    variance: float = 0.0


def _seed_mean(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis as a running mean: exactly x for one seed or identical seeds
    (a plain sum/S can round away from x), so repeating a seed never changes the p-value."""
    mean = x[..., 0].copy()
    for s in range(1, x.shape[-1]):
        mean += (x[..., s] - mean) / (s + 1)
    return mean


def paired_bootstrap_seeds(
    systems: list[np.ndarray],
    baselines: list[np.ndarray],
    n_samples: int = 10000,
    seed: int = DEFAULT_SEED,
    subset: np.ndarray | None = None,
) -> BootstrapResult:
    """Paired bootstrap test of system vs baseline BLEU, one combined test over seeds.

    systems[s], baselines[s]: sentence_stats of seed s's system and baseline outputs (same
    references, same n). subset: optional boolean mask or index array; the test then runs on those
    m sentences exactly as sacreBLEU would on the subset files (counts drawn for n=m).
    With one seed the p-value equals sacreBLEU's ``PairedTest(test_type="bs")``.
    """
    if not systems or len(systems) != len(baselines):
        raise ValueError(f"need one baseline per system seed, got {len(systems)} and {len(baselines)}")
    stats = [np.asarray(a, dtype=np.float64) for a in (*systems, *baselines)]
    n = stats[0].shape[0]
    if any(a.shape != (n, 2 + 2 * MAX_ORDER) for a in stats):
        raise ValueError("all statistics must be [n, 10] for the same n sentences")
    if subset is not None:
        subset = np.asarray(subset)
        if subset.dtype == bool and subset.shape != (n,):
            raise ValueError(f"boolean subset of length {subset.shape} for {n} sentences")
        stats = [a[subset] for a in stats]
    return _paired_bootstrap(stats, len(systems), bleu_from_stats, n_samples, seed)


def paired_bootstrap_ratio(
    systems: list[np.ndarray], baselines: list[np.ndarray], n_samples: int = 10000, seed: int = DEFAULT_SEED
) -> BootstrapResult:
    """The same test for a ratio of sums, e.g. a token-weighted mean NLL: systems[s], baselines[s]
    are `[n, 2]` (numerator, denominator) per unit (sentence or input); score = sum(num) / sum(den)."""
    if not systems or len(systems) != len(baselines):
        raise ValueError(f"need one baseline per system seed, got {len(systems)} and {len(baselines)}")
    stats = [np.asarray(a, dtype=np.float64) for a in (*systems, *baselines)]
    if any(a.shape != (stats[0].shape[0], 2) for a in stats):
        raise ValueError("all statistics must be [n, 2] (numerator, denominator) for the same n units")

    if any(a[:, 1].sum() <= 0 for a in stats):
        raise ValueError("a system or baseline has no denominator (no tokens) to take a ratio of")

    def ratio(sums: np.ndarray, float32: bool = True) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):  # a resample without tokens: no ratio (NaN)
            return np.where(sums[..., 1] > 0, sums[..., 0] / sums[..., 1], np.nan)

    return _paired_bootstrap(stats, len(systems), ratio, n_samples, seed)


def _paired_bootstrap(stats: list[np.ndarray], n_seeds: int, score, n_samples: int, seed: int) -> BootstrapResult:
    """stats: the systems' then the baselines' per-unit statistics `[m, d]`; score(sums, float32)
    turns summed statistics `[..., d]` into scores (float32=False for the observed ones)."""
    m = stats[0].shape[0]
    if m == 0:
        raise ValueError("no sentences to test")
    observed = score(np.stack([a.sum(axis=0) for a in stats]), float32=False)
    per_seed = observed[:n_seeds] - observed[n_seeds:]
    difference = float(_seed_mean(per_seed))

    # One matmul sums every resample of every system and seed: [n_samples, 2 * seeds, d].
    stacked = np.concatenate(stats, axis=1).astype(np.float32)
    resampled = (resample_counts(m, n_samples, seed) @ stacked).reshape(n_samples, 2 * n_seeds, -1)
    scores = score(resampled)
    resampled_mean = _seed_mean(scores[:, :n_seeds] - scores[:, n_seeds:])
    finite = resampled_mean[np.isfinite(resampled_mean)]
    variance = float(np.var(finite, ddof=1)) if finite.size > 1 else 0.0
    if np.all(per_seed == 0):  # identical scores: nothing to attribute to chance (sacreBLEU's p of 1)
        return BootstrapResult(1.0, difference, per_seed.tolist(), n_samples, variance)
    sample = np.abs(resampled_mean)
    centred = sample - sample.mean()  # the null hypothesis: resampled differences centred on 0
    count = int(np.sum(centred > abs(difference)))
    return BootstrapResult((count + 1) / (n_samples + 1), difference, per_seed.tolist(), n_samples, variance)


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), order preserved.

    None entries (tests that were not run) are left out of the family and stay None.
    """
    present = [i for i, p in enumerate(p_values) if p is not None]
    order = sorted(present, key=lambda i: p_values[i])
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        # The k-th smallest p is multiplied by the number of hypotheses still standing; the running
        # maximum keeps a larger raw p from getting a smaller adjusted one.
        running = max(running, min(1.0, (len(order) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
