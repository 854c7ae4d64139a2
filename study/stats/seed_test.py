"""A comparison of two encodings over training seeds: the variance model, the test, its interval and
its power (the rules that word a comparison from them: study/stats/rules.py).

The question is about encodings, not about two trained models, so the unit of replication is the
training seed. Seed s's difference on the same test sentences is modelled as

    d_s = δ + e_s + w_s + u,

δ the true difference, e_s the seed effect (variance σ²), w_s seed s's own test-set noise (the
seed-by-sentence interaction, variance v_int) and u the test set's noise every seed shares (the same
sentences, variance v_shared). The spread of the d_s estimates σ² + v_int, never v_shared, so

    Var(mean d) = s_d²/n + v_shared,   SE = sqrt(s_d²/n + v_shared),

each part counted once. v_shared and v_int come from the sentence bootstrap (study/stats/
significance.py): the joint bootstrap's variance of mean(d) is v_sent = v_shared + v_int/n and each
seed's own is v_shared + v_int (split_variance); where a row lacks the per-seed variances, v_shared is
bounded by v_sent (conservative). v_shared is taken as known and s_d² has n - 1 degrees of freedom, so
T = (mean(d) - μ) / SE is referred to Student's t with the Welch–Satterthwaite degrees of freedom
df = SE⁴ / ((s_d²/n)² / (n - 1)) (n - 1 without shared noise, more with it). Every p, interval,
equivalence test and power of the current rule uses this SE and df. Assumptions: the seed effects
are independent and roughly normal (tests/study/simulate/test_calibration.py checks the rules with normal
and t(3) seed effects). References: Dror, Baumer, Shlomov & Reichart, ACL 2018; Reimers & Gurevych,
EMNLP 2017; Satterthwaite, Biometrics Bulletin 1946.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

ALPHA = 0.05
POWER = 0.8
MIN_SENTENCES = 10  # a row carried by fewer units (sentences, pairs, inputs) is not tested
MODEL = (
    "seed-level t-test: T = mean(d) / SE, SE = sqrt(s_d^2/n + v_shared), Student's t with the "
    "Welch-Satterthwaite degrees of freedom SE^4 / ((s_d^2/n)^2 / (n - 1)); d = per-seed differences on the "
    "same test sentences, s_d their SD (seed effects plus each seed's own test-set noise), v_shared = the "
    "test set's noise every seed shares (from the sentence bootstrap)"
)
ONE_SEED = "one seed: this trained model, not the encoding"


@dataclass(frozen=True)
class SeedTest:
    """A row's seed-level test (`seed_test`); `se_seed_veto` is the older rule's SE (study/stats/rules.py), set
    by the wording (study/judge/verdicts.py) on a new copy where the family's rule is that one."""

    n: int
    mean: float  # mean over seeds of d_s
    seed_sd: Optional[float]  # s_d (None for one seed)
    v_sent: float  # variance of mean(d) under the joint sentence bootstrap: v_shared + v_int / n
    se: Optional[float]  # sqrt(s_d^2/n + v_shared)
    p_value: Optional[float]  # two-sided, against no difference; None for one seed
    low: Optional[float]  # 95% interval of the true difference, per row (not Holm-adjusted)
    high: Optional[float]
    v_shared: Optional[float] = None  # the test set's noise every seed shares (more seeds never shrink it)
    v_int: Optional[float] = None  # each seed's own test-set noise (inside s_d)
    df: Optional[float] = None  # Welch-Satterthwaite degrees of freedom (None: infinite)
    se_seed_veto: Optional[float] = None  # the seed_veto rule's SE (only where the family's rule is it)


def t_quantile(q: float, df) -> float:
    from scipy.stats import t

    return float(t.ppf(q, np.inf if df is None else df))


def chi2_ratios(df: float, points: int = 4000) -> np.ndarray:
    """`points` quantiles of χ²(df)/df, an estimated variance over the true one (a power averages over them)."""
    from scipy.stats import chi2

    return chi2.ppf((np.arange(points) + 0.5) / points, df) / df


def welch_df(seed_part, se, n: int):
    """SE⁴ / (seed_part² / (n - 1)) for SE² = s_d²/n + known; infinite where the seeds do not vary."""
    seed_part = np.asarray(seed_part, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(seed_part > 0, np.asarray(se) ** 4 * (n - 1) / seed_part**2, np.inf)


def standard_error(diffs, known, welch: bool = True):
    """(mean, SE, df) of each row of `diffs [..., n]` (n >= 2): SE² = s_d²/n + known, df Welch's or n - 1."""
    d = np.asarray(diffs, dtype=np.float64)
    n = d.shape[-1]
    seed_part = d.var(-1, ddof=1) / n
    se = np.sqrt(seed_part + np.maximum(known, 0.0))
    df = welch_df(seed_part, se, n) if welch else np.full_like(se, n - 1.0)
    return d.mean(-1), se, df


def beyond_p(mean, se, df, margin: float = 0.0):
    """Two-sided p of 'the true difference lies beyond ±margin on the side of the mean', min(1,
    2 P(t_df > (|mean| - margin) / SE)) (margin 0: the usual test); SE 0: 0 beyond the margin, else 1."""
    from scipy.stats import t

    mean, se = np.asarray(mean, dtype=np.float64), np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.minimum(1.0, 2 * t.sf((np.abs(mean) - margin) / se, df))
    p = np.where(se > 0, p, np.where(np.abs(mean) > margin, 0.0, 1.0))
    return np.where(np.isfinite(mean) & np.isfinite(se), p, np.nan)


def seed_p(diffs, known, margin: float = 0.0, welch: bool = True) -> np.ndarray:
    """beyond_p of each row of `diffs [..., n]` (vectorised: the calibration runs the findings' test)."""
    return beyond_p(*standard_error(diffs, known, welch), margin)


def split_variance(
    v_sent: float, per_seed: Optional[Sequence[float]], n: int
) -> tuple[Optional[float], Optional[float]]:
    """(v_shared, v_int) of v_sent = v_shared + v_int / n and mean(per seed) = v_shared + v_int."""
    if not per_seed or n < 2 or len(per_seed) != n:
        return None, None
    v_int = max(0.0, (float(np.mean(per_seed)) - v_sent) * n / (n - 1))
    return max(0.0, v_sent - v_int / n), v_int


def shared_variance(t: SeedTest) -> float:
    """The known part of a row's SE²: v_shared, or the joint variance v_sent where it was not split."""
    return t.v_shared if t.v_shared is not None else t.v_sent


def seed_test(diffs: Sequence[float], v_sent: float, per_seed_variance: Optional[Sequence[float]] = None) -> SeedTest:
    """The seed-level test of per-seed differences `diffs` (v_sent split by each seed's own variance)."""
    d = np.asarray(diffs, dtype=np.float64)
    n, mean, v_sent = len(d), float(d.mean()), float(v_sent)
    v_shared, v_int = split_variance(v_sent, per_seed_variance, n)
    if n < 2 or not np.isfinite(d).all():
        return SeedTest(n, mean, None, v_sent, None, None, None, None, v_shared, v_int)
    _, se, df = (float(x) for x in standard_error(d, v_sent if v_shared is None else v_shared))
    half = t_quantile(1 - ALPHA / 2, df) * se
    p, finite_df = float(beyond_p(mean, se, df)), df if math.isfinite(df) else None
    return SeedTest(n, mean, float(d.std(ddof=1)), v_sent, se, p, mean - half, mean + half, v_shared, v_int, finite_df)


def power(effect: float, se: float, df, alpha: float, margin: float = 0.0) -> float:
    """Probability that the two-sided test beyond ±`margin` at `alpha` finds a direction (either way)
    when the true difference is `effect`: with SE_hat² ~ SE² χ²(df)/df, a direction when |mean| - margin
    > t_crit SE_hat."""
    from scipy.stats import norm

    if se <= 0:
        return float(abs(effect) > margin)
    df = np.inf if df is None or not math.isfinite(df) else df
    ratio = chi2_ratios(df) if math.isfinite(df) else np.ones(1)
    reach = margin / se + t_quantile(1 - alpha / 2, df) * np.sqrt(ratio)  # |mean| / SE must pass this
    return float(np.mean(norm.sf(reach - abs(effect) / se) + norm.cdf(-reach - abs(effect) / se)))


def detectable_effect(se: float, df, alpha: float, margin: float = 0.0, target: float = POWER) -> float:
    """The smallest true difference the test beyond ±`margin` finds with probability `target`."""
    from scipy.optimize import brentq

    if se <= 0:
        return margin
    hi = margin + se
    while power(hi, se, df, alpha, margin) < target:
        hi *= 2
    return float(brentq(lambda e: power(e, se, df, alpha, margin) - target, 0.0, hi, xtol=se * 1e-6))


def planned_se(seed_sd: float, v_shared: float, n: int, welch: bool = True) -> tuple[float, float]:
    """(SE, df) at n seeds of the seeds' SD and the shared test-set variance (df Welch's or n - 1)."""
    seed_part = seed_sd * seed_sd / n
    se = math.sqrt(seed_part + v_shared)
    return se, float(welch_df(seed_part, se, n)) if welch else n - 1.0


def fewest_seeds(enough: Callable[[int], bool], limit: Optional[int] = None) -> Optional[int]:
    """The least n >= 2 with enough(n), monotone in n (bracket by doubling, then bisect); None past `limit`."""
    low, high = 1, 2
    while not enough(high):
        low, high = high, high * 2
        if limit is not None and high > limit:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def seeds_needed(
    effect: float,
    seed_sd: float,
    v_shared: float,
    alpha: float,
    margin: float = 0.0,
    target: float = POWER,
    welch: bool = True,
) -> Optional[int]:
    """The seeds a true difference `effect` needs for `target` power (the test beyond ±`margin`, its df
    Welch's or n - 1); None when no number does (the shared test-set noise alone leaves less power)."""
    if power(effect, math.sqrt(v_shared), None, alpha, margin) < target:
        return None
    return fewest_seeds(lambda n: power(effect, *planned_se(seed_sd, v_shared, n, welch), alpha, margin) >= target)
