"""The decision rules calibrated, each property with a mutation that must fail it. Exactly (study/
simulate/edge_rates.py, integration over s_d², no Monte Carlo): the current rule words a direction on an
edge of the tie margin, both tails counted, in at most α/2 of studies at every n of 3-40, every ratio r of
the seed variance to n·v_shared and every margin-to-SE λ; mutation: Welch–Satterthwaite df (the older
`beyond_tie`). By simulating the demo's declared family whole (study/simulate/calibration.py):

1. a direction is worded where the true difference is 0 or on an edge of the tie margin in at most
   2.5% (+ 2 Monte-Carlo SE; the edges pooled) of studies; mutation: the test against 0 instead of
   beyond ±tie (about 8% on an edge at 20 seeds);
2. at the demo's observed values, the chance of the right direction for RoPE and learnable (test set)
   never falls by more than 2 MC SE from n seeds to the next n of 5, 10, 20, 40; mutation: the veto;
3. the 95% interval of a test-set row covers the true difference in 93.5-96.5% of studies at 5 and 20
   seeds (normal seed effects; t(3) printed); mutation: v_int/n counted again in the SE.

The long version (every n, both seed distributions for every check) is marked slow."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from study.read.archived import declared_rows
from study.simulate import edge_rates
from study.simulate.calibration import (
    AGAINST_ZERO,
    STUDIES,
    calibration_markdown,
    coverage,
    false_directions,
    mc_bound,
    right_direction,
)
from study.stats.rules import BEYOND_TIE, CURRENT, SEED_VETO, Rule
from study.stats.seed_test import ALPHA

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "results/demo/summary_findings.json"


@pytest.fixture(scope="module")
def demo():
    rows, tie = declared_rows(DEMO)
    assert len(rows) == 4 and tie == 0.1, "the demo's family as archived (make results)"
    return rows, tie


def too_often(rule: Rule, demo, ns, dists) -> list[str]:
    """The settings where `rule` words a direction within the tie margin more often than α/2 allows."""
    rows, tie = demo
    failed = []
    for n in ns:
        for dist in dists:
            rates = false_directions(rule, rows, tie, n, dist)
            print(f"{rule.name}, n={n}, {dist}: " + ", ".join(f"δ={d}: {r:.2%}" for d, r in rates.items()))
            count = {"0": len(rows) * STUDIES, "±tie": 2 * len(rows) * STUDIES}
            failed += [f"n={n} {dist} δ={d}" for d, r in rates.items() if r > mc_bound(ALPHA / 2, count[d])]
    return failed


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


def test_no_direction_within_the_tie_margin(demo):
    assert too_often(CURRENT, demo, (5, 20), ("normal", "t3")) == []


def test_the_test_against_zero_fails_the_tie_margin_calibration(demo):
    assert "n=20 normal δ=±tie" in too_often(AGAINST_ZERO, demo, (20,), ("normal",))


@pytest.mark.slow
def test_no_direction_within_the_tie_margin_at_every_n(demo):
    assert too_often(CURRENT, demo, (5, 10, 20, 40), ("normal", "t3")) == []


def falls(rule: Rule, demo, ns, dist: str = "normal") -> list[str]:
    """Where the chance of the right direction (test-set rows) falls by more than 2 MC SE from one n
    to the next."""
    rows, tie = demo
    test_set = [i for i, r in enumerate(rows) if r.name.endswith("test set")]
    chances = {n: [right_direction(rule, rows, tie, n, dist)[i] for i in test_set] for n in ns}
    print(f"{rule.name}, {dist}, right direction by seeds:", chances)
    out = []
    for a, b in zip(ns, ns[1:]):
        for p, q in zip(chances[a], chances[b]):
            if q < p - 2 * math.sqrt((p * (1 - p) + q * (1 - q)) / STUDIES):
                out.append(f"{p:.2f} at n={a} -> {q:.2f} at n={b}")
    return out


def test_the_chance_of_the_right_direction_rises_with_seeds(demo):
    assert falls(CURRENT, demo, (5, 10, 20, 40)) == []
    rows, tie = demo
    assert min(right_direction(CURRENT, rows, tie, 20)) > 0.9  # the demo's 20 seeds word all four nearly always


def test_the_veto_fails_the_power_calibration(demo):
    assert falls(SEED_VETO, demo, (5, 10, 20, 40))


@pytest.mark.slow
def test_the_chance_of_the_right_direction_rises_with_seeds_t3(demo):
    assert falls(CURRENT, demo, (5, 10, 20, 40, 80), "t3") == []


def test_the_interval_covers_at_its_level(demo):
    test_set = [r for r in demo[0] if r.name.endswith("test set")]
    normal = {n: coverage(test_set, n, "normal") for n in (5, 20)}
    print(f"95% interval coverage, normal: {normal}; t(3): {[coverage(test_set, n, 't3') for n in (5, 20)]}")
    assert all(0.935 <= c <= 0.965 for c in normal.values()), normal


def test_counting_the_test_sets_noise_twice_fails_the_coverage(demo):
    test_set = [r for r in demo[0] if r.name.endswith("test set")]
    twice = [coverage(test_set, n, "normal", count_v_int_twice=True) for n in (5, 20)]
    assert all(c > 0.965 for c in twice), twice


@pytest.mark.slow  # (make results-check recomputes the page too)
def test_the_page_figures_are_these_simulations(demo):
    """results/calibration.md (results/README.md's block) is calibration_markdown of the archived demo
    family, so the figures the page states are the ones these tests check."""
    assert (ROOT / "results/calibration.md").read_text(encoding="utf-8") == calibration_markdown(*declared_rows(DEMO))


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
