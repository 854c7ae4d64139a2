"""Equivalence as a finding: two one-sided seed-level tests (TOST, Schuirmann 1987).

"Not significant" says nothing about whether two encodings are close: a study too small to separate
them is also too small to show them alike. TOST asks the second question directly. With the
margin m a study declares (configs/<study>/findings/headline.yaml: `equivalence`), a row's true
difference δ is tested twice, one-sided, with the statistic of the difference test
(study/stats/seed_test.py: T = mean(d) / SE, SE = sqrt(s_d^2/n + v_shared), Welch–Satterthwaite df):

    p_lower: H0 δ <= -m against δ > -m,   p_lower = P(t > (mean + m) / SE)
    p_upper: H0 δ >= +m against δ < +m,   p_upper = P(t < (mean - m) / SE)

and the row's equivalence p is max(p_lower, p_upper): both must reject. The declared rows'
equivalence p form a family of their own, Holm-corrected apart from the difference rows; a row is
"equivalent within ±m" when its adjusted p is below α. A row can be both a direction and
equivalent (a small real difference inside the margin), or neither (inconclusive). The calibration
test (tests/study/stats/test_equivalence.py) simulates whole families at δ = ±m.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from study.stats.seed_test import POWER, chi2_ratios, fewest_seeds, planned_se, standard_error, t_quantile, welch_df


def equivalence_p(diffs: np.ndarray, known, margin: float, welch: bool = True) -> np.ndarray:
    """max(p_lower, p_upper) of TOST at ±`margin` for each row of per-seed differences `diffs [..., n]`
    (n >= 2), `known` the known part of SE²: vectorised, as seed_test.seed_p."""
    from scipy.stats import t

    mean, se, df = standard_error(diffs, known, welch)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.maximum(t.sf((mean + margin) / se, df), t.cdf((mean - margin) / se, df))
    # SE 0: the mean is exact; inside the margin is shown, on or outside it is not
    p = np.where(se > 0, p, np.where(np.abs(mean) < margin, 0.0, 1.0))
    return np.where(np.isfinite(mean) & np.isfinite(se), p, np.nan)


def equivalence_power(
    margin: float, seed_sd: float, n: int, v_shared: float, alpha: float, delta: float = 0.0, welch: bool = True
) -> float:
    """Probability that TOST at `alpha` shows equivalence within ±`margin` over `n` seeds when the true
    difference is `delta`: the mean over seeds ~ N(delta, SE²), SE² = s_d²/n + v_shared, and s_d²
    estimated with n - 1 degrees of freedom; shown when |mean| < m - t_crit SE_hat, averaged over
    4,000 quantiles of s_d_hat² / s_d² ~ chi2(n - 1) / (n - 1), t_crit at each draw's Welch df (or n - 1)."""
    from scipy.stats import norm, t

    spread, _ = planned_se(seed_sd, v_shared, n)
    seed_part = seed_sd * seed_sd * chi2_ratios(n - 1) / n
    se_hat = np.sqrt(seed_part + v_shared)
    df = welch_df(seed_part, se_hat, n) if welch else n - 1
    reach = margin - t.ppf(1 - alpha, df) * se_hat  # |mean| below it is shown
    if spread <= 0:
        return float(np.mean(abs(delta) < reach))
    inside = norm.cdf((reach - delta) / spread) - norm.cdf((-reach - delta) / spread)
    return float(np.mean(np.where(reach > 0, inside, 0.0)))


def seeds_for_equivalence(
    margin: float, seed_sd: float, v_shared: float, alpha: float, target: float = POWER, welch: bool = True
) -> Optional[int]:
    """How many seeds TOST needs to show equivalence within ±`margin` with `target` power when the
    true difference is 0; None when no number of seeds reaches it (the test set's noise every seed
    shares alone leaves less power)."""
    from scipy.stats import norm

    # infinitely many seeds: the mean ~ N(0, v_shared), shown when |mean| < m - z sqrt(v_shared)
    room = margin - t_quantile(1 - alpha, 100_000) * math.sqrt(v_shared)
    if room <= 0 or (v_shared > 0 and 2 * norm.cdf(room / math.sqrt(v_shared)) - 1 < target):
        return None
    return fewest_seeds(
        lambda n: equivalence_power(margin, seed_sd, n, v_shared, alpha, welch=welch) >= target, limit=1 << 20
    )
