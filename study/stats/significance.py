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

import functools
import math
from dataclasses import dataclass

import numpy as np

DEFAULT_SEED = 12345  # sacreBLEU's SACREBLEU_SEED default
MAX_ORDER = 4  # BLEU-4: stats are [sys_len, ref_len, correct_1..4, total_1..4]

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
    """BLEU score(s) [...] of summed statistics [..., 10], as BLEU()._compute_score_from_stats does:
    float32=True the bootstrap resamples of ``_paired_bs_test`` (float32 statistics, so float32 n-gram
    precisions: NumPy 2 keeps ``100. * np.float32`` in float32), False the observed corpus score
    (Python ints, hence float64 precisions)."""
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
    """[n_samples, n] float32: how often each sentence is drawn in each bootstrap resample, from exactly
    sacreBLEU's draws, ``default_rng(seed).choice(n, (n_samples, n))``, so that ``counts @ stats`` equals
    its per-resample sums. Memoised (read-only): a report asks the same for every system and bucket."""
    return _resample_counts(int(n), int(n_samples), int(seed))


@functools.lru_cache(maxsize=4)
def _resample_counts(n: int, n_samples: int, seed: int) -> np.ndarray:
    idx = np.random.default_rng(seed).choice(n, size=(n_samples, n), replace=True)
    counts = np.empty((n_samples, n), dtype=np.float32)
    chunk = max(1, (1 << 18) // max(n, 1))  # a block of rows at a time: small, cache-warm buffers
    for start in range(0, n_samples, chunk):
        block = idx[start : start + chunk]
        flat = (block + n * np.arange(block.shape[0])[:, None]).ravel()
        counts[start : start + block.shape[0]] = np.bincount(flat, minlength=block.size).reshape(block.shape)
    counts.flags.writeable = False
    return counts


@dataclass
class BootstrapResult:
    p_value: float
    difference: float  # observed mean over seeds of system BLEU minus baseline BLEU
    per_seed: list[float]  # observed per-seed differences
    n_samples: int
    # the resamples' variance of the mean difference over seeds: the test set's share (seed_test.py: v_sent)
    variance: float = 0.0


def _seed_mean(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis as a running mean: exactly x for one seed or identical seeds
    (a plain sum/S can round away from x), so repeating a seed never changes the p-value."""
    mean = x[..., 0].copy()
    for s in range(1, x.shape[-1]):
        mean += (x[..., s] - mean) / (s + 1)
    return mean


def _statistics(systems: list[np.ndarray], baselines: list[np.ndarray], width: int, units: str) -> list[np.ndarray]:
    """The systems' then the baselines' per-unit statistics, each `[n, width]`."""
    if not systems or len(systems) != len(baselines):
        raise ValueError(f"need one baseline per system seed, got {len(systems)} and {len(baselines)}")
    stats = [np.asarray(a, dtype=np.float64) for a in (*systems, *baselines)]
    if any(a.shape != (stats[0].shape[0], width) for a in stats):
        raise ValueError(f"all statistics must be [n, {width}]{units}")
    return stats


def paired_bootstrap_seeds(
    systems: list[np.ndarray],
    baselines: list[np.ndarray],
    n_samples: int = 10000,
    seed: int = DEFAULT_SEED,
    subset: np.ndarray | None = None,
) -> BootstrapResult:
    """The test of system vs baseline BLEU over seeds: systems[s], baselines[s] are seed s's
    sentence_stats (same references); `subset` (a boolean mask or indices) tests those m sentences
    exactly as sacreBLEU would the subset files (counts drawn for n=m)."""
    stats = _statistics(systems, baselines, 2 + 2 * MAX_ORDER, " for the same n sentences")
    if subset is not None:
        subset = np.asarray(subset)
        if subset.dtype == bool and subset.shape != (len(stats[0]),):
            raise ValueError(f"boolean subset of length {subset.shape} for {len(stats[0])} sentences")
        stats = [a[subset] for a in stats]
    return _paired_bootstrap(stats, len(systems), bleu_from_stats, n_samples, seed)


def paired_bootstrap_ratio(
    systems: list[np.ndarray], baselines: list[np.ndarray], n_samples: int = 10000, seed: int = DEFAULT_SEED
) -> BootstrapResult:
    """The same test for a ratio of sums, e.g. a token-weighted mean NLL: systems[s], baselines[s]
    are `[n, 2]` (numerator, denominator) per unit (sentence or input); score = sum(num) / sum(den)."""
    stats = on_exact_grid(_statistics(systems, baselines, 2, " (numerator, denominator) for the same n units"))
    if any(a[:, 1].sum() <= 0 for a in stats):
        raise ValueError("a system or baseline has no denominator (no tokens) to take a ratio of")

    def ratio(sums: np.ndarray, float32: bool = True) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):  # a resample without tokens: no ratio (NaN)
            return np.where(sums[..., 1] > 0, sums[..., 0] / sums[..., 1], np.nan)

    return _paired_bootstrap(stats, len(systems), ratio, n_samples, seed, np.float64)


def on_exact_grid(stats: list[np.ndarray]) -> list[np.ndarray]:
    """Non-integer statistics (an NLL's nats) rounded to multiples of 2^-q, q as large as keeps every
    resample's sum below 2^52 (at most 2^-30: nothing that shows moves). Every sum of them, in any order,
    is then exact in float64, so the bootstrap's figures are the same bit for bit on every CPU: a float32
    (or float64) matmul of raw values rounds its partial sums in an order the BLAS kernel picks
    (the kernels it picks on two CPUs gave sums that differ in the seventh digit)."""
    top = max(float(np.abs(a).max(initial=0.0)) for a in stats) * max(len(stats[0]), 1)
    q = min(30, 52 - math.ceil(math.log2(top))) if top > 0 else 30
    return [np.ldexp(np.round(np.ldexp(a, q)), -q) for a in stats]


def resampled_sums(counts: np.ndarray, stats: list[np.ndarray], dtype=np.float32) -> np.ndarray:
    """[n_samples, sum of widths]: every resample's sums of every statistic, in one matmul in `dtype`:
    float32 for BLEU's integer counts (sacreBLEU's arithmetic, exact while a resample's sum stays below
    2^24), float64 for statistics `on_exact_grid` (exact below 2^52)."""
    return counts.astype(dtype, copy=False) @ np.concatenate(stats, axis=1).astype(dtype)


def _paired_bootstrap(
    stats: list[np.ndarray], n_seeds: int, score, n_samples: int, seed: int, dtype=np.float32
) -> BootstrapResult:
    """score(sums, float32) turns summed statistics `[..., d]` into scores (float32=False: observed); the
    resamples are summed in `dtype` (`resampled_sums`)."""
    m = stats[0].shape[0]
    if m == 0:
        raise ValueError("no sentences to test")
    observed = score(np.stack([a.sum(axis=0) for a in stats]), float32=False)
    per_seed = observed[:n_seeds] - observed[n_seeds:]
    difference = float(_seed_mean(per_seed))

    resampled = resampled_sums(resample_counts(m, n_samples, seed), stats, dtype).reshape(n_samples, 2 * n_seeds, -1)
    scores = score(resampled)
    resampled_mean = _seed_mean(scores[:, :n_seeds] - scores[:, n_seeds:])
    finite = resampled_mean[np.isfinite(resampled_mean)]
    variance = float(np.var(finite, ddof=1)) if finite.size > 1 else 0.0
    p_value = 1.0  # identical scores: nothing to attribute to chance (sacreBLEU's p of 1)
    if not np.all(per_seed == 0):
        sample = np.abs(resampled_mean)
        centred = sample - sample.mean()  # the null hypothesis: resampled differences centred on 0
        p_value = (int(np.sum(centred > abs(difference))) + 1) / (n_samples + 1)
    return BootstrapResult(p_value, difference, per_seed.tolist(), n_samples, variance)


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p along the last axis (step-down: the k-th smallest p times the number
    of hypotheses still standing, a running maximum so that a larger raw p never gets a smaller
    adjusted one, capped at 1), order preserved: vectorised for the calibration's simulated families."""
    k = p.shape[-1]
    order = np.argsort(p, -1)
    ranked = np.take_along_axis(p, order, -1) * (k - np.arange(k))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, -1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, -1)
    return out


def holm(p_values: list[float | None]) -> list[float | None]:
    """holm_rows of one family; None entries (tests that were not run) are left out and stay None."""
    present = [i for i, p in enumerate(p_values) if p is not None]
    adjusted: list[float | None] = [None] * len(p_values)
    for i, p in zip(present, holm_rows(np.array([p_values[i] for i in present], dtype=np.float64))):
        adjusted[i] = float(p)
    return adjusted
