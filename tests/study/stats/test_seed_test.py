"""The variance model and the seed-level test (study/stats/seed_test.py): the SE counts the test set's
noise once (s_d²/n + v_shared, with Welch–Satterthwaite df), the test and its interval equal a hand
computation, the test beyond a margin is the usual test at margin 0, power and detectable effect agree
with each other, and seeds-needed is monotone. The rules built on them are calibrated by simulation in
tests/study/simulate/test_calibration.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from study.stats.seed_test import (
    beyond_p,
    detectable_effect,
    planned_se,
    power,
    seed_p,
    seed_test,
    seeds_needed,
    split_variance,
    welch_df,
)


def test_seed_test_equals_a_hand_computation():
    d, v_shared, v_int = [0.8, -0.2, 1.1, 0.4], 0.01, 0.04
    n = len(d)
    got = seed_test(d, v_shared + v_int / n, [v_shared + v_int] * n)
    seed_part = np.var(d, ddof=1) / n
    se = math.sqrt(seed_part + v_shared)  # v_int is inside s_d: counted once, never added again
    df = se**4 / (seed_part**2 / (n - 1))
    assert got.se == pytest.approx(se) and got.df == pytest.approx(df)
    assert got.p_value == pytest.approx(2 * stats.t.sf(abs(np.mean(d)) / se, df))
    half = stats.t.ppf(0.975, df) * se
    assert (got.low, got.high) == pytest.approx((np.mean(d) - half, np.mean(d) + half))
    # without the per-seed variances the joint variance bounds v_shared (conservative)
    bounded = seed_test(d, v_shared + v_int / n)
    assert bounded.se == pytest.approx(math.sqrt(seed_part + v_shared + v_int / n))
    # without shared noise it is the one-sample t-test of the seeds' differences (n - 1 df)
    assert seed_test(d, 0.0).p_value == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    assert seed_test(d, 0.0).df == pytest.approx(n - 1)
    one = seed_test([1.5], 0.01)
    assert one.p_value is None and one.low is None and one.mean == 1.5


def test_the_test_beyond_a_margin():
    """p = min(1, 2 P(t > (|mean| - margin) / SE)): margin 0 is the two-sided test; inside the margin
    it is 1; an exact mean (SE 0) is beyond the margin or not."""
    d = np.array([[0.5, 0.7, 0.6, 0.9], [-0.5, -0.7, -0.6, -0.9]])
    mean, n = d.mean(-1), d.shape[-1]
    seed_part = d.var(-1, ddof=1) / n
    se = np.sqrt(seed_part + 0.002)
    df = welch_df(seed_part, se, n)
    want = 2 * stats.t.sf((np.abs(mean) - 0.1) / se, df)
    assert seed_p(d, 0.002, 0.1) == pytest.approx(want)  # symmetric: either side
    assert seed_p(d, 0.002) == pytest.approx(2 * stats.t.sf(np.abs(mean) / se, df))
    assert seed_p(np.array([0.05, -0.02, 0.03]), 0.0, 0.1) == 1.0
    assert beyond_p(0.3, 0.0, np.inf, 0.1) == 0.0 and beyond_p(0.05, 0.0, np.inf, 0.1) == 1.0
    assert np.isnan(seed_p(np.array([[float("nan"), 1.0]]), 0.1)[0])
    assert seed_test([float("nan"), 1.0], 0.1).p_value is None


def test_power_and_detectable_effect_agree_and_seeds_needed_is_monotone():
    for se, df, alpha, margin in ((0.3, 2, 0.05, 0.0), (0.5, 4, 0.05 / 21, 0.1), (0.1, 9.5, 0.01, 0.05)):
        effect = detectable_effect(se, df, alpha, margin)
        assert effect > margin
        assert power(effect, se, df, alpha, margin) == pytest.approx(0.8, abs=2e-3)
        if margin == 0:
            assert power(0.0, se, df, alpha) == pytest.approx(alpha, rel=0.02)  # no effect: the test's size
        else:  # on the margin: α/2 towards it, and the far side's small share
            assert alpha / 2 * 0.98 <= power(margin, se, df, alpha, margin) <= alpha
    nc, se, df, alpha = 2.0, 0.3, 6, 0.05  # against scipy's noncentral t where it is accurate
    crit = stats.t.ppf(1 - alpha / 2, df)
    assert power(nc * se, se, df, alpha) == pytest.approx(
        stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc), abs=2e-3
    )
    small, large = seeds_needed(0.5, 0.7, 0.02, 0.05), seeds_needed(1.0, 0.7, 0.02, 0.05)
    assert large < small
    assert power(1.0, *planned_se(0.7, 0.02, large), 0.05) >= 0.8 > power(1.0, *planned_se(0.7, 0.02, large - 1), 0.05)
    assert seeds_needed(0.01, 1.0, 0.5, 0.05) is None  # below what the shared test-set noise allows
    assert seeds_needed(1.0, 0.7, 0.02, 0.05, margin=0.1) > large  # beyond a margin needs more seeds


def test_the_test_sets_noise_splits_into_shared_and_per_seed_parts():
    """Joint bootstrap variance of mean(d) = shared + per-seed / n; each seed's own bootstrap
    variance = shared + per-seed."""
    shared, own, n = 0.01, 0.04, 4
    v_shared, v_int = split_variance(shared + own / n, [shared + own] * n, n)
    assert (v_shared, v_int) == (pytest.approx(shared), pytest.approx(own))
    assert split_variance(0.02, None, 3) == (None, None)
    got = seed_test([0.4, 0.5, 0.6, 0.7], shared + own / n, [shared + own] * n)
    assert got.v_shared == pytest.approx(shared) and got.v_int == pytest.approx(own)


def test_welch_df_lies_between_n_minus_1_and_infinity():
    seed_part, n = np.array([0.04, 0.01, 0.0]), 5
    se = np.sqrt(seed_part + 0.01)
    df = welch_df(seed_part, se, n)
    assert df[0] > n - 1 and df[1] > df[0] and np.isinf(df[2])
    assert welch_df(0.04, 0.2, n) == pytest.approx(n - 1)  # no shared part: n - 1
