"""Equivalence as a finding (study/stats/equivalence.py, study/judge/verdicts.py): TOST equals a hand
computation; and, by simulation of whole declared families, "equivalent within ±m" is said for a true
difference on the margin (+m or -m) in at most 5% (+ 2 Monte-Carlo SE) of studies, while for a true
difference of 0 it is found at least as often as the power the findings print. Dropping either
one-sided test fails the calibration (the mutation test below runs both)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from study.stats.equivalence import equivalence_p, equivalence_power, seeds_for_equivalence
from study.stats.seed_test import ALPHA, standard_error
from study.stats.significance import holm

STUDIES = 4000


MC_SE = math.sqrt(ALPHA * (1 - ALPHA) / STUDIES)


# Settings of the shape the studies have (BLEU on the demo's test set; nats of degradation): seeds n,
# the margin m, the seed effects' SD, the test set's noise every seed shares (v_shared, which more
# seeds never shrink) and the per-seed part (v_int); a family of K declared rows like it.
SETTINGS = [
    {"name": "demo BLEU", "n": 20, "m": 1.0, "effect_sd": 1.1, "v_shared": 0.08, "v_int": 0.25, "K": 4},
    {"name": "length NLL", "n": 12, "m": 0.10, "effect_sd": 0.07, "v_shared": 4e-4, "v_int": 1e-3, "K": 15},
    {"name": "few seeds", "n": 5, "m": 1.0, "effect_sd": 0.6, "v_shared": 0.05, "v_int": 0.1, "K": 1},
    {"name": "close encodings", "n": 20, "m": 1.0, "effect_sd": 0.5, "v_shared": 0.02, "v_int": 0.05, "K": 2},
]


def test_tost_equals_a_hand_computation():
    d = np.array([0.3, -0.2, 0.5, 0.1, 0.0])
    v, m = 0.01, 1.0
    seed_part = d.var(ddof=1) / 5
    se = math.sqrt(seed_part + v)
    df = se**4 * 4 / seed_part**2  # Welch–Satterthwaite
    lower = stats.t.sf((d.mean() + m) / se, df)
    upper = stats.t.cdf((d.mean() - m) / se, df)
    assert equivalence_p(d, v, m) == pytest.approx(max(lower, upper), rel=1e-12)
    old = max(stats.t.sf((d.mean() + m) / se, 4), stats.t.cdf((d.mean() - m) / se, 4))
    assert equivalence_p(d, v, m, welch=False) == pytest.approx(old, rel=1e-12)  # the older rule: n - 1 df
    assert equivalence_p(np.array([0.2, 0.2]), 0.0, 1.0) == 0.0  # exact and inside the margin
    assert equivalence_p(np.array([1.0, 1.0]), 0.0, 1.0) == 1.0  # on the margin is not inside it


def test_equivalence_power_and_seeds_agree():
    m = 1.0
    p = equivalence_power(m, 1.0, 20, 0.02, ALPHA)
    # on the margin: the test's size (Welch–Satterthwaite's df, taken at each estimate, is a hair liberal)
    assert 0.8 < p < 1.0 and equivalence_power(m, 1.0, 20, 0.02, ALPHA, delta=m) < ALPHA * 1.01
    assert equivalence_power(m, 4.0, 5, 0.5, ALPHA) == 0.0  # the interval cannot fit inside the margin
    n = seeds_for_equivalence(m, 1.0, 0.02, ALPHA)
    assert n is not None
    assert equivalence_power(m, 1.0, n, 0.02, ALPHA) >= 0.8 > equivalence_power(m, 1.0, n - 1, 0.02, ALPHA)
    assert seeds_for_equivalence(m, 1.0, 0.5, ALPHA) is None  # the shared test-set noise is too large


def simulate_family(setting: dict, delta: float, dist: str, rng, p_of=None) -> np.ndarray:
    """[STUDIES, K] bool: which rows of each simulated family the rule calls equivalent (Holm over the
    family's equivalence p). Per row and seed: the true difference, a seed effect (normal or t(3),
    unit variance scaled), the test set's per-seed noise; plus one shared draw for all seeds of a row;
    the known part of the SE: v_shared, as the sentence bootstrap estimates it."""
    n, k = setting["n"], setting["K"]
    if dist == "normal":
        e = rng.standard_normal((STUDIES, k, n))
    else:
        e = rng.standard_t(3, (STUDIES, k, n)) / math.sqrt(3.0)
    diffs = (
        delta
        + setting["effect_sd"] * e
        + math.sqrt(setting["v_int"]) * rng.standard_normal((STUDIES, k, n))
        + math.sqrt(setting["v_shared"]) * rng.standard_normal((STUDIES, k, 1))
    )
    p = (p_of or equivalence_p)(diffs, setting["v_shared"], setting["m"])
    adjusted = np.array([holm(list(row)) for row in p])
    return adjusted < ALPHA


def printed_power(setting: dict) -> float:
    """The equivalence power the findings print for a row of this setting (Holm's first step)."""
    seed_sd = math.sqrt(setting["effect_sd"] ** 2 + setting["v_int"])  # what s_d estimates
    return equivalence_power(setting["m"], seed_sd, setting["n"], setting["v_shared"], ALPHA / setting["K"])


def calibration(p_of=None) -> dict:
    """Per setting and seed-effect distribution: the family-wise rate of 'equivalent' at +m and -m,
    and the per-row rate at 0 with the printed power."""
    rng = np.random.default_rng(54)
    out = {}
    for s in SETTINGS:
        for dist in ("normal", "t3"):
            at = {edge: simulate_family(s, edge * s["m"], dist, rng, p_of).any(1).mean() for edge in (+1, -1)}
            found = simulate_family(s, 0.0, dist, rng, p_of).mean()
            out[(s["name"], dist)] = {"+m": at[+1], "-m": at[-1], "0": found, "printed": printed_power(s)}
    return out


@pytest.fixture(scope="module")
def calibrated():
    return calibration()


def test_equivalence_is_calibrated_on_the_margin(calibrated):
    for (name, dist), r in calibrated.items():
        print(f"{name}, {dist}: equivalent at +m {r['+m']:.2%}, at -m {r['-m']:.2%} of {STUDIES} families")
        assert r["+m"] <= ALPHA + 2 * MC_SE, (name, dist)
        assert r["-m"] <= ALPHA + 2 * MC_SE, (name, dist)


def test_equivalence_is_found_at_the_printed_power(calibrated):
    for (name, dist), r in calibrated.items():
        print(f"{name}, {dist}: found at 0 in {r['0']:.1%} of rows, printed power {r['printed']:.1%}")
        assert r["0"] >= r["printed"] - 3 * math.sqrt(0.25 / STUDIES), (name, dist)
        if name == "few seeds" and dist == "normal":  # a family of one: the printed power is the rate
            assert abs(r["0"] - r["printed"]) <= 0.03, (name, dist)
    assert calibrated[("close encodings", "normal")]["0"] > 0.8  # the simulation can find equivalence


@pytest.mark.slow
@pytest.mark.parametrize("dropped", ["lower", "upper"])
def test_dropping_either_one_sided_test_fails_the_calibration(dropped):
    """The mutation check: TOST with one side only says 'equivalent' far too often at one edge."""

    def one_side(diffs, known, margin):
        mean, se, df = standard_error(diffs, known)
        if dropped == "upper":
            return stats.t.sf((mean + margin) / se, df)
        return stats.t.cdf((mean - margin) / se, df)

    edge = "+m" if dropped == "upper" else "-m"
    result = calibration(one_side)
    assert any(r[edge] > ALPHA + 2 * MC_SE for r in result.values()), edge
