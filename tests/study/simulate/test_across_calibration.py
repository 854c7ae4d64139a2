"""The across-set rule calibrated by simulation (study/simulate/across_calibration.py), each property with
a mutation that must fail it:

1. wrong wording on an edge of the tie margin in at most α/2 (+ 2 Monte-Carlo SE): at the demo's test-set
   rows, and at the rule's worst case (no shared noise, the margin small against the SE), where one set on
   the edge words wrongly in exactly α/2 and two sets on the other edge in 1 - (1 - α/4)²; mutations: the
   union (the smallest p, 65% at 5 seeds), and for four sets "depends" without its (K - 1)/2 (3.7%);
2. no direction across where the sets go opposite ways; mutation: the sets' signs ignored (99% at 20 seeds);
3. the chance of the right direction across rises with seeds, and nears 1 at 20 seeds.

The long version of 1 (both seed distributions, every ρ, every n) is marked slow; the page's figures are
checked whole by tests/study/simulate/test_calibration.py::test_the_page_figures_are_these_simulations."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import study.stats.across_sets as across_sets
from study.read.archived import DeclaredRow, declared_rows, rows_on_test_set
from study.simulate.across_calibration import EDGE_STUDIES, RHOS, SEEDS, STUDIES, signless, simulate, union, worst
from study.simulate.calibration import mc_bound
from study.stats.seed_test import ALPHA

ROOT = Path(__file__).resolve().parents[3]
BOUND = mc_bound(ALPHA / 2, EDGE_STUDIES)
WORST = DeclaredRow("worst case", 1.0, 1.0, 0.0, 0.0)  # no shared noise (r = ∞)
TINY = 1e-6  # a tie margin small against the SE (λ = 0)


@pytest.fixture(scope="module")
def demo():
    rows, tie = declared_rows(ROOT / "results/demo/summary_findings.json")
    return rows_on_test_set(rows), tie


def edge_rates(demo, ns, dists, rhos=(0.0,), **kw) -> dict[str, float]:
    rows, tie = demo
    return {
        f"{s} n={n} K={k} {d} ρ={rho} {r.name}": simulate(s, r, tie, n, k, d, rho, **kw)
        for s in ("same", "other")
        for n in ns
        for k in (2, 3)
        for d in dists
        for rho in rhos
        for r in rows
    }


def test_no_wrong_wording_on_an_edge_at_the_demo_rows(demo):
    rates = edge_rates(demo, (5, 20), ("normal",), studies=5000)
    print(rates)
    assert max(rates.values()) <= mc_bound(ALPHA / 2, 5000), rates


@pytest.mark.slow
def test_no_wrong_wording_on_an_edge_at_the_demo_rows_everywhere(demo):
    rates = edge_rates(demo, (SEEDS[0], SEEDS[-1]), ("normal", "t3"), RHOS)  # (the fewest and most seeds)
    assert max(rates.values()) <= BOUND, {k: v for k, v in rates.items() if v > BOUND}


@pytest.mark.parametrize("setting, k", [("same", 2), ("same", 3), ("other", 2), ("other", 3), ("other", 4)])
def test_no_wrong_wording_on_an_edge_at_the_worst_case(setting, k):
    """One set on the +tie edge: exactly α/2 (both of its tails, α/4 each). K - 1 sets on the -tie edge (≈ 0
    here), independent: "ahead across" where all of them are worded ahead, (α/4)^(K-1), and "depends" where
    any is worded behind at α/f, 1 - (1 - α/(4f))^(K-1): exactly α/2 for K ≤ 3 (f = 1), 2.48% for four
    sets with f = 1.5."""
    rate = simulate(setting, WORST, TINY, 5, k, "normal", 0.0)
    f, a = across_sets.depends_factor(k), ALPHA / 4
    expected = ALPHA / 2 if setting == "same" else a ** (k - 1) + 1 - (1 - a / f) ** (k - 1)
    print(f"{setting}, K={k}: {rate:.4f} (expected {expected:.4f})")
    assert expected <= ALPHA / 2 + 1e-12  # the bound, exactly met at K ≤ 3
    assert abs(rate - expected) < 3 * math.sqrt(expected * (1 - expected) / EDGE_STUDIES)  # and simulated so


def test_the_union_fails_the_edge(demo):
    rows, tie = demo
    rate = worst("same", rows, tie, 5, 2, "normal", across=union, studies=STUDIES)
    assert rate > 0.5, rate


def test_depends_without_its_factor_fails_the_edge_on_four_sets(monkeypatch):
    monkeypatch.setattr(across_sets, "depends_factor", lambda sets: 1.0)
    rate = simulate("other", WORST, TINY, 5, 4, "normal", 0.0)
    print(f"four sets, depends at the smallest p's alone: {rate:.4f}")
    assert rate > BOUND


def test_no_direction_across_where_the_sets_go_opposite_ways(demo):
    rows, tie = demo
    assert max(worst("opposite", rows, tie, n, 2, "normal") for n in (5, 20)) <= BOUND


def test_ignoring_the_signs_fails_the_opposite_ways(demo):
    rows, tie = demo
    assert worst("opposite", rows, tie, 20, 2, "normal", across=signless, studies=STUDIES) > 0.5


def falls(demo, setting: str, dist: str, k: int) -> list[str]:
    """Where the chance of the right direction across falls by more than 2 MC SE from one n to the next."""
    rows, tie = demo
    out = []
    for r in rows:
        chance = [simulate(setting, r, tie, n, k, dist, 0.0) for n in SEEDS]
        print(f"{setting}, {dist}, K={k}, {r.name}: {chance}")
        if setting == "power":
            assert chance[-1] > 0.9
        for p, q in zip(chance, chance[1:]):
            if q < p - 2 * math.sqrt((p * (1 - p) + q * (1 - q)) / STUDIES):
                out.append(f"{r.name}: {p:.2f} -> {q:.2f}")
    return out


@pytest.mark.parametrize("k", (2, 3))
def test_the_chance_of_the_right_direction_across_rises_with_seeds(demo, k):
    assert falls(demo, "power", "normal", k) == []


@pytest.mark.parametrize("setting, dist", [("power", "t3"), ("half", "normal"), ("half", "t3")])
def test_the_chance_rises_with_seeds_t3_and_at_half(demo, setting, dist):
    assert falls(demo, setting, dist, 3) == []
