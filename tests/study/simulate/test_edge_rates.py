"""A rule's edge rate and power by exact integration over s_d² (study/simulate/edge_rates.py), each
property with a mutation that must fail it: the current rule words a direction on an edge of the tie
margin, both tails counted, in at most α/2 of studies at every n of 3-40, every ratio r of the seed
variance to n·v_shared and every margin-to-SE λ, exactly α/2 at its worst case (mutation: Welch–
Satterthwaite df, the older `beyond_tie`); a sequential plan under it at most α/2 over its looks
(mutation: the normal-scale boundaries carried to the t by level); and the integral is what the rule's
own decision p gives on simulated studies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from study.simulate import edge_rates
from study.simulate.calibration import mc_bound
from study.stats.rules import BEYOND_TIE, CURRENT
from study.stats.seed_test import ALPHA


@pytest.mark.parametrize("n", edge_rates.SEEDS)
def test_a_direction_on_an_edge_within_alpha_half_at_every_r_exactly(n):
    worst = max(edge_rates.edge_rate(CURRENT, n, r, lam) for r in edge_rates.RATIOS for lam in (0.0, 0.3, 1.0))
    print(f"{CURRENT.name}, n={n}: worst edge rate {worst:.6f}")
    assert worst <= ALPHA / 2 + 1e-9  # exactly α/2 at r = ∞, λ = 0 (Student's t at n - 1 df)
    assert worst >= ALPHA / 2 - 1e-6  # and no more conservative than that at its worst


@pytest.mark.parametrize("n", (5, 40))
def test_welch_df_fail_the_exact_edge_calibration(n):
    """At the demo's 5 seeds Welch–Satterthwaite's df word a direction on the edge in 5.8% (λ = 0) and, at
    the demo rows' own λ, 3.5-3.7%; at 40 seeds, both tails, still 5.0% at λ = 0."""
    rate, at = edge_rates.worst_edge_rate(BEYOND_TIE, n)
    print(f"{BEYOND_TIE.name}, n={n}: worst edge rate {rate:.4f} at r={at}")
    assert rate > ALPHA / 2 * 1.5


@pytest.mark.parametrize("rule", [CURRENT, BEYOND_TIE], ids=lambda r: r.name)
def test_the_integral_is_what_the_rules_decision_p_gives(rule):
    """Reference: 100,000 simulated studies on the edge (n = 5, r = 1, λ = 0.3), each decided by the
    rule's own decision_p, within 3 Monte-Carlo SE of the exact integral."""
    n, ratio, lam, studies = 5, 1.0, 0.3, 100_000
    v_shared = 1.0 / (n * ratio)  # seed variance 1
    tie = lam * math.sqrt(1.0 / n + v_shared)
    rng = np.random.default_rng(7)
    d = tie + rng.standard_normal((studies, n)) + math.sqrt(v_shared) * rng.standard_normal((studies, 1))
    simulated = float(np.mean(rule.decision_p(d, v_shared, tie) < ALPHA))
    exact = edge_rates.edge_rate(rule, n, ratio, lam)
    assert abs(simulated - exact) < 3 * math.sqrt(exact * (1 - exact) / studies), (simulated, exact)


def test_power_rises_with_seeds_and_costs_what_the_page_says():
    """At the demo's RoPE row (mean +0.82 BLEU, seed SD 0.59, v_shared 0.0054): each rule's chance of the
    right direction rises with n, the exact rule's below Welch's."""
    args = (0.82, 0.59, 0.0054, 0.1)
    exact = [edge_rates.power(CURRENT, n, *args) for n in (5, 8, 12, 20)]
    welch = [edge_rates.power(BEYOND_TIE, n, *args) for n in (5, 8, 12, 20)]
    assert exact == sorted(exact) and welch == sorted(welch) and all(e < w for e, w in zip(exact, welch))


@pytest.mark.parametrize("looks", edge_rates.PLANS)
def test_a_plan_words_a_direction_on_an_edge_within_alpha_half(looks):
    """Each look's own rate exactly half its level (its worst case, r = ∞), so the plan's is at most α/2
    (the union bound); simulated too, at r = ∞, 1 and 0, within α/2 + 2 Monte-Carlo SE."""
    exact = edge_rates.look_edge_rates(CURRENT, looks)
    assert sum(exact) == pytest.approx(ALPHA / 2, abs=1e-9)
    assert exact == pytest.approx([level / 2 for level in edge_rates.look_levels(CURRENT, looks)], abs=1e-9)
    for ratio in (math.inf, 1.0, 0.0):
        rate, _ = edge_rates.plan_edge_rate(CURRENT, looks, ratio, studies=50_000, seed=1)
        print(f"{looks}, r={ratio}: {rate:.4f}")
        assert rate <= mc_bound(ALPHA / 2, 50_000)


@pytest.mark.parametrize("looks", edge_rates.PLANS)
def test_z_boundaries_carried_by_level_fail_the_plan_calibration(looks):
    """beyond_tie's design: the normal-scale boundary carried to its Welch t by nominal level."""
    exact = edge_rates.look_edge_rates(BEYOND_TIE, looks)
    rate, _ = edge_rates.plan_edge_rate(BEYOND_TIE, looks, studies=50_000, seed=1)
    print(f"{looks}: per look {exact}, plan {rate:.4f}")
    assert sum(exact) > ALPHA / 2 * 1.5 and rate > mc_bound(ALPHA / 2, 50_000)
