"""The decision rules calibrated by simulation of whole declared families (evaluation/rules.py).

The family simulated is the demo's, as archived (results/demo/summary_findings.json): its four declared
rows, each with its own seed SD s_d, the test set's shared noise v_shared and each seed's own test-set
noise v_int, taken as known. Per simulated study and row: d_s = δ + e_s + w_s + u, e_s the seed effect
(normal, or t(3) scaled to unit variance) with variance s_d² - v_int, w_s ~ N(0, v_int) per seed,
u ~ N(0, v_shared) once for every seed; then the rule as the findings apply it (decision p, Holm over
the four rows, the direction test). Three properties, each with a mutation that must fail it:

1. a direction is worded where the true |δ| is within the tie margin (δ = 0, +tie, -tie, the other rows
   at their observed means, which lets Holm pass the row its whole α: the worst case) in at most 2.5%
   (+ 2 Monte-Carlo SE; the two edges pooled) of studies; mutation: the test against 0 instead of
   beyond ±tie (about 8% at the edge at 20 seeds);
2. at the demo's observed values, the chance of the right direction for RoPE and learnable (test set)
   never falls by more than 2 MC SE from n seeds to the next n of 5, 10, 20, 40; mutation: the veto;
3. the 95% interval of a test-set row covers the true difference in 93.5-96.5% of studies at 5 and 20
   seeds (normal seed effects; t(3) printed); mutation: v_int/n counted again in the SE.

The long version (more n, both seed distributions for every check) is marked slow."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evaluation.rules import BEYOND_TIE, SEED_VETO, Rule
from evaluation.seed_test import ALPHA, standard_error, t_quantile
from evaluation.significance import holm

ROOT = Path(__file__).resolve().parents[2]
STUDIES = 2000
TIE = 0.1  # the demo family's tie margin (sacreBLEU)


def demo_rows() -> list[dict]:
    """The demo family's declared rows as archived: name, observed mean, s_d, v_shared, v_int."""
    findings = json.loads((ROOT / "results/demo/summary_findings.json").read_text(encoding="utf-8"))
    assert findings["tie_margin"]["sacreBLEU"] == TIE
    rows = []
    for t in findings["tables"]:
        for r in t["rows"]:
            if r.get("declared"):
                s = r["seed_test"]
                rows.append({"name": f"{r['config']} {r['compared_on']}", **{k: s[k] for k in ("mean", "seed_sd", "v_shared", "v_int")}})
    assert len(rows) == 4 and all(r["v_shared"] is not None for r in rows)
    return rows


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm's adjusted p along the last axis (evaluation/significance.holm, vectorised)."""
    k = p.shape[-1]
    order = np.argsort(p, -1)
    ranked = np.take_along_axis(p, order, -1) * (k - np.arange(k))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, -1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, -1)
    return out


def draw(rows: list[dict], means: list[float], n: int, dist: str, rng) -> list[np.ndarray]:
    """[STUDIES, n] per-seed differences of each row under the variance model."""
    out = []
    for r, mean in zip(rows, means):
        if dist == "normal":
            e = rng.standard_normal((STUDIES, n))
        else:
            e = rng.standard_t(3, (STUDIES, n)) / math.sqrt(3.0)
        effect_sd = math.sqrt(max(r["seed_sd"] ** 2 - r["v_int"], 0.0))
        out.append(
            mean
            + effect_sd * e
            + math.sqrt(r["v_int"]) * rng.standard_normal((STUDIES, n))
            + math.sqrt(r["v_shared"]) * rng.standard_normal((STUDIES, 1))
        )
    return out


def decide(rule: Rule, rows: list[dict], diffs: list[np.ndarray]) -> np.ndarray:
    """[STUDIES, rows] of +1/-1/0: the rule's direction for each row of each simulated family."""
    n = diffs[0].shape[-1]
    known = [r["v_shared"] if rule.welch else r["v_shared"] + r["v_int"] / n for r in rows]
    p = np.stack([rule.decision_p(d, v, TIE) for d, v in zip(diffs, known)], -1)
    adjusted = holm_rows(p)
    return np.stack([rule.direction(d, adjusted[:, i], TIE) for i, d in enumerate(diffs)], -1)


def false_direction_rate(rule: Rule, rows: list[dict], n: int, dist: str, seed: int) -> dict:
    """{'0': rate, '±tie': rate} of a direction worded for a row whose true difference is 0, or on
    either edge of the tie margin (the two edges pooled: they are mirror images), each row in turn
    (the others at their observed means), pooled over the rows."""
    rng = np.random.default_rng(seed)
    said: dict = {"0": [], "±tie": []}
    for delta in (0.0, TIE, -TIE):
        for i in range(len(rows)):
            means = [delta if j == i else r["mean"] for j, r in enumerate(rows)]
            said["0" if delta == 0 else "±tie"].append(decide(rule, rows, draw(rows, means, n, dist, rng))[:, i] != 0)
    return {k: float(np.mean(v)) for k, v in said.items()}


def bound(rate: float, count: int) -> float:
    return rate + 2 * math.sqrt(rate * (1 - rate) / count)


AGAINST_ZERO = replace(BEYOND_TIE, name="against_zero", against_tie=False)  # the mutation of property 1


def test_vectorised_holm_equals_the_harness_holm():
    p = np.random.default_rng(0).uniform(size=(50, 4)) ** 3
    assert holm_rows(p) == pytest.approx(np.array([holm(list(row)) for row in p]))


def check_false_directions(rule: Rule, ns, dists) -> list[str]:
    """The settings where `rule` words a direction within the tie margin more often than allowed."""
    rows, failed = demo_rows(), []
    for n in ns:
        allowed = ALPHA / 2
        for dist in dists:
            rates = false_direction_rate(rule, rows, n, dist, seed=n)
            print(f"{rule.name}, n={n}, {dist}: " + ", ".join(f"δ={d}: {r:.2%}" for d, r in rates.items()))
            count = {"0": len(rows) * STUDIES, "±tie": 2 * len(rows) * STUDIES}
            failed += [f"n={n} {dist} δ={d}" for d, r in rates.items() if r > bound(allowed, count[d])]
    return failed


def test_no_direction_within_the_tie_margin():
    assert check_false_directions(BEYOND_TIE, (5, 20), ("normal", "t3")) == []


def test_the_test_against_zero_fails_the_tie_margin_calibration():
    failed = check_false_directions(AGAINST_ZERO, (20,), ("normal",))
    assert "n=20 normal δ=±tie" in failed


@pytest.mark.slow
def test_no_direction_within_the_tie_margin_at_every_n():
    assert check_false_directions(BEYOND_TIE, (5, 10, 20, 40), ("normal", "t3")) == []


def right_direction(rule: Rule, ns, dist: str = "normal") -> dict:
    """{n: [chance of the observed direction for each test-set row]} at the demo's observed values."""
    rows = demo_rows()
    test_set = [i for i, r in enumerate(rows) if r["name"].endswith("test set")]
    out = {}
    for n in ns:
        rng = np.random.default_rng(100 + n)
        said = decide(rule, rows, draw(rows, [r["mean"] for r in rows], n, dist, rng))
        out[n] = [float(np.mean(said[:, i] == np.sign(rows[i]["mean"]))) for i in test_set]
    return out


def falls(chances: dict) -> list[str]:
    """Where the chance of the right direction falls by more than 2 MC SE from one n to the next."""
    ns = sorted(chances)
    out = []
    for a, b in zip(ns, ns[1:]):
        for row, (p, q) in enumerate(zip(chances[a], chances[b])):
            se = math.sqrt((p * (1 - p) + q * (1 - q)) / STUDIES)
            if q < p - 2 * se:
                out.append(f"row {row}: {p:.2f} at n={a} -> {q:.2f} at n={b}")
    return out


def test_the_chance_of_the_right_direction_rises_with_seeds():
    chances = right_direction(BEYOND_TIE, (5, 10, 20, 40))
    print("beyond_tie, right direction (learnable, rope):", chances)
    assert falls(chances) == []
    assert min(chances[20]) > 0.9  # the demo's 20 seeds word both test-set rows nearly always


def test_the_veto_fails_the_power_calibration():
    chances = right_direction(SEED_VETO, (5, 10, 20, 40))
    print("seed_veto, right direction (learnable, rope):", chances)
    assert falls(chances)


@pytest.mark.slow
def test_the_chance_of_the_right_direction_rises_with_seeds_t3():
    assert falls(right_direction(BEYOND_TIE, (5, 10, 20, 40, 80), "t3")) == []


def coverage(ns, dist: str, count_v_int_twice: bool = False) -> dict:
    """{n: the share of studies whose 95% interval covers the true difference}, pooled over the demo's
    test-set rows (where v_int is 35-58% of s_d²), the true difference at its observed mean."""
    rows = [r for r in demo_rows() if r["name"].endswith("test set")]
    out = {}
    for n in ns:
        rng = np.random.default_rng(200 + n)
        covered = []
        for r, d in zip(rows, draw(rows, [r["mean"] for r in rows], n, dist, rng)):
            known = r["v_shared"] + (r["v_int"] / n if count_v_int_twice else 0.0)
            mean, se, df = standard_error(d, known)
            half = np.array([t_quantile(0.975, x) for x in df]) * se
            covered.append(np.abs(mean - r["mean"]) <= half)
        out[n] = float(np.mean(covered))
    return out


def test_the_interval_covers_at_its_level():
    normal, t3 = coverage((5, 20), "normal"), coverage((5, 20), "t3")
    print(f"95% interval coverage, normal seed effects: {normal}; t(3): {t3}")
    assert all(0.935 <= c <= 0.965 for c in normal.values()), normal


def test_counting_the_test_sets_noise_twice_fails_the_coverage():
    twice = coverage((5, 20), "normal", count_v_int_twice=True)
    print("with v_int/n added back:", twice)
    assert all(c > 0.965 for c in twice.values()), twice
