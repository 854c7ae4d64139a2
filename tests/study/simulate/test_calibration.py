"""The decision rules calibrated by simulating the demo's declared family whole (study/simulate/
calibration.py; the exact edge rates: tests/study/simulate/test_edge_rates.py), each property with a
mutation that must fail it:

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
from study.simulate.calibration import (
    AGAINST_ZERO,
    STUDIES,
    coverage,
    false_directions,
    mc_bound,
    right_direction,
    rules_calibration_markdown,
)
from study.stats.rules import CURRENT, SEED_VETO, Rule
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
    """results/calibration.md (results/README.md's block) begins with the rules' calibration of the archived
    demo family, so the figures the page states are the ones these tests check. (The across-set block after
    it, 14 s to simulate, is recomputed and compared by `make results-check`; its properties are
    tests/study/simulate/test_across_calibration.py's.)"""
    page = (ROOT / "results/calibration.md").read_text(encoding="utf-8")
    assert page.startswith(rules_calibration_markdown(*declared_rows(DEMO)) + "\n\n")
