"""A comparison of two encodings over training seeds: the test, its interval, its power, and the
rule that words it.

The question is about encodings, not about two trained models, so the unit of replication is the
training seed. For a comparison run with n >= 2 seeds, d_s is seed s's difference (system minus
baseline, on the same test sentences) and

    T = mean(d) / SE,   SE = sqrt(s_d^2 / n + v_sent),

tested against Student's t with n - 1 degrees of freedom, two-sided; v_sent is the variance of
mean(d) under a joint bootstrap of the test sentences (the same resampled sentences for every seed
and both systems: evaluation/significance.py), so the finite test set's noise is counted once on
top of the seeds' spread. Assumptions: the seed effects are independent and roughly normal (the
calibration test in tests/evaluation/test_seed_test.py checks the rule with normal and t(3) seed effects).
Reference: Dror, Baumer, Shlomov & Reichart, "The Hitchhiker's Guide to Testing Statistical
Significance in NLP" (ACL 2018), and for the seed as the unit, Reimers & Gurevych, "Reporting Score
Distributions Makes a Difference" (EMNLP 2017).

A comparison is worded "ahead"/"behind" only when it was declared in the study's headline family
(configs/<study>/findings/headline.yaml), its Holm-adjusted p over that family is below ALPHA, and no seed's
difference lies beyond the tie margin on the other side. Every other row is descriptive: how many
seeds fall above, below and within the tie margin, and the 95% interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

ALPHA = 0.05
POWER = 0.8
TEST_NAME = (
    "seed-level t-test: T = mean(d) / sqrt(s_d^2/n + v_sent), Student's t with n - 1 degrees of "
    "freedom, two-sided; d = per-seed differences, v_sent = variance of mean(d) under the joint "
    "bootstrap of test sentences (the same resampled sentences for every seed)"
)
ONE_SEED = "one seed: this trained model, not the encoding"
# Tie margins when a study declares none: a seed closer to the baseline than this is a tie
DEFAULT_TIE_MARGIN = {"sacreBLEU": 0.1, "NLL": 0.01}
DEFAULT_EFFECT = {"sacreBLEU": 1.0, "NLL": 0.05}  # the effect whose seeds-needed is reported


@dataclass
class SeedTest:
    n: int
    mean: float  # mean over seeds of d_s
    seed_sd: Optional[float]  # s_d (None for one seed)
    v_sent: float  # variance of mean(d) under the joint sentence bootstrap
    se: Optional[float]
    p_value: Optional[float]  # two-sided; None for one seed
    low: Optional[float]  # 95% interval of mean(d), per row (not Holm-adjusted)
    high: Optional[float]
    # v_sent split (from each seed's own bootstrap variance): the test set's noise shared by every
    # seed, which more seeds never shrink, and the seed-by-sentence part, which shrinks as 1/n
    v_shared: Optional[float] = None
    v_int: Optional[float] = None


def t_quantile(q: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(q, df))


def seed_p(diffs: np.ndarray, v_sent) -> np.ndarray:
    """Two-sided p of the seed-level test for each row of per-seed differences `diffs [..., n]`
    (n >= 2), with the sentence-bootstrap variance `v_sent` (scalar or [...]): vectorised, so the
    calibration simulation runs the very test the findings use."""
    from scipy.stats import t

    d = np.asarray(diffs, dtype=np.float64)
    n = d.shape[-1]
    mean = d.mean(-1)
    se = np.sqrt(d.var(-1, ddof=1) / n + np.maximum(v_sent, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * t.sf(np.abs(mean) / se, n - 1)
    # SE 0: every seed identical and no sentence noise, nothing to attribute to chance; NaN: no test
    p = np.where(se > 0, p, np.where(mean == 0, 1.0, 0.0))
    return np.where(np.isfinite(mean) & np.isfinite(se), p, np.nan)


def split_variance(
    v_sent: float, per_seed: Optional[Sequence[float]], n: int
) -> tuple[Optional[float], Optional[float]]:
    """(v_shared, v_int) from the joint bootstrap's variance of mean(d) and each seed's own bootstrap
    variance: mean(per seed) = v_shared + v_int and v_sent = v_shared + v_int / n (None without them)."""
    if not per_seed or n < 2 or len(per_seed) != n:
        return None, None
    v_int = max(0.0, (float(np.mean(per_seed)) - v_sent) * n / (n - 1))
    return max(0.0, v_sent - v_int / n), v_int


def seed_test(diffs: Sequence[float], v_sent: float, per_seed_variance: Optional[Sequence[float]] = None) -> SeedTest:
    """The seed-level test of per-seed differences `diffs` with sentence-bootstrap variance `v_sent`
    (and each seed's own bootstrap variance, for the power of more seeds)."""
    d = np.asarray(diffs, dtype=np.float64)
    n = len(d)
    mean = float(d.mean())
    v_shared, v_int = split_variance(float(v_sent), per_seed_variance, n)
    p = float(seed_p(d, v_sent)) if n >= 2 else float("nan")
    if n < 2 or not math.isfinite(p):
        return SeedTest(n, mean, None, float(v_sent), None, None, None, None, v_shared, v_int)
    sd = float(d.std(ddof=1))
    se = math.sqrt(sd * sd / n + max(float(v_sent), 0.0))
    half = t_quantile(1 - ALPHA / 2, n - 1) * se
    return SeedTest(n, mean, sd, float(v_sent), se, p, mean - half, mean + half, v_shared, v_int)


def direction(diffs: np.ndarray, p_adjusted, margin: float, alpha: float = ALPHA) -> np.ndarray:
    """+1 / -1 where the rule words a declared comparison (mean difference up / down), 0 where it
    stays descriptive: adjusted p below `alpha` and no seed beyond the tie margin on the other side.
    Vectorised over rows of `diffs [..., n]`."""
    d = np.asarray(diffs, dtype=np.float64)
    up = d.mean(-1) > 0
    against = np.where(up, (d < -margin).any(-1), (d > margin).any(-1))
    says = (np.asarray(p_adjusted) < alpha) & ~against & (d.mean(-1) != 0)
    return np.where(says, np.where(up, 1, -1), 0)


def power(effect: float, se: float, df: int, alpha: float) -> float:
    """Probability that the two-sided t-test at `alpha` rejects when the true mean difference is
    `effect`: T = (Z + effect/se) / sqrt(V/df) with V ~ chi2(df), averaged over 4,000 quantiles of V
    (scipy's noncentral t returns NaN far in its tails)."""
    from scipy.stats import chi2, norm

    if se <= 0:
        return 1.0
    crit = t_quantile(1 - alpha / 2, df)
    nc = abs(effect) / se
    scale = crit * np.sqrt(chi2.ppf((np.arange(4000) + 0.5) / 4000, df) / df)
    return float(np.mean(norm.sf(scale - nc) + norm.cdf(-scale - nc)))


def detectable_effect(se: float, df: int, alpha: float, target: float = POWER) -> float:
    """The smallest true difference the test finds with probability `target` (80%)."""
    from scipy.optimize import brentq

    if se <= 0:
        return 0.0
    hi = se
    while power(hi, se, df, alpha) < target:
        hi *= 2
    return float(brentq(lambda e: power(e, se, df, alpha) - target, 0.0, hi, xtol=se * 1e-6))


def seeds_needed(
    effect: float, seed_sd: float, v_shared: float, v_int: float, alpha: float, target: float = POWER
) -> Optional[int]:
    """How many seeds a true difference `effect` needs for `target` power at `alpha` with the test as
    it stands at n seeds, SE^2 = seed_sd^2/n + v_shared + v_int/n; None when no number of seeds
    reaches it (the shared test-set noise alone, at infinitely many seeds, leaves less power)."""

    def enough(n: int) -> bool:
        return power(effect, math.sqrt(seed_sd * seed_sd / n + v_shared + v_int / n), n - 1, alpha) >= target

    if power(effect, math.sqrt(v_shared), 100_000, alpha) < target:
        return None
    low, high = 1, 2  # power grows with n: find a bracket, then bisect
    while not enough(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


# ----------------------------------------------------------------------------- wording


def fmt_number(x: Optional[float], metric: str) -> str:
    """A difference in its metric's digits, signed (NLL to 3 decimals, BLEU to 2); – for none."""
    return "–" if x is None else f"{x:+.3f}" if metric == "NLL" else f"{x:+.2f}"


def unit_of(metric: str) -> str:
    return "nats" if metric == "NLL" else "BLEU"


def seed_signs(diffs: Sequence[float], margin: float) -> tuple[int, int, int]:
    """Seeds above +margin, below -margin, and within (ties)."""
    above = sum(d > margin for d in diffs)
    below = sum(d < -margin for d in diffs)
    return above, below, len(diffs) - above - below


def describe(row: dict, metric: str, margin: float) -> str:
    """A descriptive row: the seeds' signs against the tie margin and the 95% interval; no verdict."""
    diffs = [s["difference"] for s in row["per_seed"]]
    above, below, within = seed_signs(diffs, margin)
    m = fmt_number(margin, metric).lstrip("+")
    signs = f"seeds: {above} above +{m}, {below} below -{m}, {within} within"
    if row["seed_test"]["p_value"] is None:
        return f"{ONE_SEED}; {signs}"
    low, high = row["seed_test"]["low"], row["seed_test"]["high"]
    return f"{signs}; 95% interval {fmt_number(low, metric)} to {fmt_number(high, metric)}"


def outcome(
    row: dict, margin: float, declared: bool, equivalence: Optional[float] = None, withheld: Optional[str] = None
) -> str:
    """What the rule lets a row say: 'not tested', 'descriptive' (not declared, or no test),
    'withheld' (declared, but `withheld` says why not), 'direction' (Holm p < ALPHA and no seed beyond
    the tie margin on the other side: `direction`), 'equivalent' (the equivalence rows' Holm p <
    ALPHA, evaluation/equivalence.py), 'both' (a small real difference inside the margin), or
    'inconclusive' (neither, for a study that declares an equivalence margin)."""
    if row.get("mean_difference") is None:
        return "not tested"
    if not declared or row["seed_test"]["p_value"] is None or row.get("p_holm") is None:
        return "descriptive"
    if withheld:
        return "withheld"
    diffs = np.array([s["difference"] for s in row["per_seed"]])
    sign = bool(direction(diffs, row["p_holm"], margin))
    p_eq = row.get("p_equivalence_holm")
    equal = p_eq is not None and p_eq < ALPHA
    if sign:
        return "both" if equal else "direction"
    return "equivalent" if equal else "inconclusive" if equivalence is not None else "descriptive"


def verdict(
    row: dict,
    metric: str,
    margin: float,
    declared: bool,
    equivalence: Optional[float] = None,
    withheld: Optional[str] = None,
) -> str:
    """The finding of one row, worded by its `outcome`: 'ahead'/'behind' ('in every seed' when every
    seed is beyond the tie margin that way, else 'on average'; lower is better for NLL) with its Holm
    p; 'equivalent within ±m' with the equivalence Holm p; both; 'inconclusive' with both p; each
    followed by the descriptive part (the seeds against the tie margin, the 95% interval)."""
    said = outcome(row, margin, declared, equivalence, withheld)
    if said == "not tested":
        return row.get("finding") or "not tested"
    text = describe(row, metric, margin)
    if said == "descriptive":
        return text
    if said == "withheld":
        return f"{withheld}; {text}"
    within = f"±{fmt_number(equivalence, metric).lstrip('+')} {unit_of(metric)}" if equivalence else ""
    p_eq = format_p(row.get("p_equivalence_holm"))
    if said == "inconclusive":
        why = f"Holm p {format_p(row['p_holm'])}"
        if row["p_holm"] < ALPHA:  # the test passed, but a seed lies beyond the tie margin the other way
            why += ", but a seed lies beyond the tie margin the other way"
        return (
            f"inconclusive: no direction worded ({why}) and not shown equivalent within {within} "
            f"(equivalence Holm p {p_eq}); {text}"
        )
    equal = f"equivalent within {within} (equivalence Holm p {p_eq}, declared)"
    if said == "equivalent":
        return f"{equal}; {text}"
    diffs = [s["difference"] for s in row["per_seed"]]
    up = row["mean_difference"] > 0
    above, below, _ = seed_signs(diffs, margin)
    every = (above if up else below) == len(diffs)
    way = (
        f"{'ahead' if up != (metric == 'NLL') else 'behind'} {'in every seed' if every else 'on average'} "
        f"(Holm p {format_p(row['p_holm'])}, declared)"
    )
    if said == "both":
        return f"{way} and {equal}: a small difference inside the margin; {text}"
    return f"{way}; {text}"


def format_p(p: Optional[float]) -> str:
    """A p-value to the digits that carry information."""
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"
