"""A rule's error on the edge of the tie margin and its power, by exact integration (no Monte Carlo).

One comparison under the variance model of study/stats/seed_test.py: the mean over n seeds is
N(δ, τ²), τ² = σ²/n + v_shared (σ² the seed variance with v_int), and s_d² ~ σ² χ²(n - 1)/(n - 1)
independently, so with W = s_d²/σ² the rule's SE is τ q(W), q = sqrt((r W + 1)/(r + 1)), where
r = σ²/(n v_shared) is the ratio of the seed variance to n·v_shared (r = ∞: no shared noise, the
classical t). The rule words "ahead" when (mean - tie)/SE > c and "behind" when (mean + tie)/SE < -c,
c its critical value (a constant for Student's t at n - 1 df; a function of r W for Welch–Satterthwaite
df). On the edge δ = +tie, λ = tie/τ,

    P(a direction) = E_W[ Φ̄(c q) + Φ̄(c q + 2λ) ]      (both tails: "ahead" and "behind" are both wrong),

one integral over W's density (scipy's adaptive quadrature; both tails of W included). λ = 0 (the
margin small against the SE) is the worst case; there the two tails are equal.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from study.stats.rules import Rule
from study.stats.seed_test import ALPHA, welch_df

RATIOS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0, math.inf)  # r: seed variance over n·v_shared
SEEDS = (3, 5, 8, 12, 20, 40)


def critical(rule: Rule, n: int, alpha: float = ALPHA) -> Callable[[float], float]:
    """r̂ -> the |t| beyond the tie margin at which `rule` words a direction alone (a family of one) at
    `alpha`: its t at n - 1 df, or at Welch–Satterthwaite's (n - 1)(1 + 1/r̂)², r̂ = s_d²/(n v_shared)."""
    from scipy.stats import t

    level = rule.two_sided(alpha) / 2
    if not rule.welch:
        c = float(t.isf(level, n - 1))
        return lambda ratio_hat: c

    def welch(ratio_hat: float) -> float:  # seed_test.welch_df in units of v_shared: seed part r̂, SE² = r̂ + 1
        df = n - 1 if ratio_hat == math.inf else float(welch_df(ratio_hat, math.sqrt(ratio_hat + 1), n))
        return float(t.isf(level, df))

    return welch


def _expect(n: int, ratio: float, integrand: Callable[[float, float], float]) -> float:
    """E over W = s_d²/σ² ~ χ²(n - 1)/(n - 1) of integrand(W, q(W)), by adaptive quadrature over W's
    density (both tails of W included)."""
    from scipy import integrate

    k = n - 1
    log_norm = k / 2 * math.log(k / 2) - math.lgamma(k / 2)  # W's density: Gamma(k/2, rate k/2)

    def at(w: float) -> float:
        if w <= 0:
            return 0.0
        q = math.sqrt(w) if ratio == math.inf else math.sqrt((ratio * w + 1) / (ratio + 1))
        return math.exp(log_norm + (k / 2 - 1) * math.log(w) - k * w / 2) * integrand(w, q)

    return float(sum(integrate.quad(at, a, b, limit=200, epsabs=1e-12)[0] for a, b in ((0, 1), (1, math.inf))))


def _sf(x: float) -> float:  # the standard normal's upper tail
    return 0.5 * math.erfc(x / math.sqrt(2))


def edge_rate(rule: Rule, n: int, ratio: float, margin_se: float = 0.0, alpha: float = ALPHA) -> float:
    """P(`rule` words a direction) for one comparison on an edge of the tie margin, both tails counted;
    `margin_se` = λ = tie/τ (0: the worst case)."""
    c = critical(rule, n, alpha)

    def integrand(w: float, q: float) -> float:
        reach = c(ratio * w) * q
        return _sf(reach) + _sf(reach + 2 * margin_se)

    return _expect(n, ratio, integrand)


def worst_edge_rate(rule: Rule, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """(the largest edge rate over RATIOS at λ = 0, the r it is at)."""
    return max((edge_rate(rule, n, r, 0.0, alpha), r) for r in RATIOS)


def parameters(n: int, seed_sd: float, v_shared: float) -> tuple[float, float]:
    """(r, τ) of a comparison over n seeds: the seed variance over n·v_shared, and the mean's true SE."""
    ratio = seed_sd**2 / (n * v_shared) if v_shared > 0 else math.inf
    return ratio, math.sqrt(seed_sd**2 / n + v_shared)


def power(rule: Rule, n: int, delta: float, seed_sd: float, v_shared: float, tie: float, alpha: float = ALPHA) -> float:
    """P(`rule` words the true direction) for one comparison at true difference `delta` over n seeds."""
    ratio, tau = parameters(n, seed_sd, v_shared)
    shift, c = (abs(delta) - tie) / tau, critical(rule, n, alpha)
    return _expect(n, ratio, lambda w, q: _sf(c(ratio * w) * q - shift))


# ----------------------------------------------------------------------------- a sequential plan's looks

PLANS = ((6, 8, 10), (8, 12, 16, 20))  # the trio's plan, and demo_confirm's
PLAN_STUDIES = 200_000  # simulated studies per setting (Monte-Carlo SE of a 2.5% rate: 0.035 points)


def look_levels(rule: Rule, looks: tuple[int, ...], alpha: float = ALPHA, spending: str = "obrien-fleming"):
    """Each look's level for `rule`'s decision p (study/stats/sequential_family.py: the level a p must pass)."""
    from study.stats.sequential_family import Plan, nominal_level

    fractions = Plan(looks).fractions
    return [nominal_level(fractions, alpha, spending, k, rule.both_tails) for k in range(len(looks))]


def look_edge_rates(rule: Rule, looks: tuple[int, ...], ratio: float = math.inf) -> list[float]:
    """Each look's own chance of a direction on the edge (λ = 0, both tails), exactly: at the look's level.
    Their sum bounds the plan's (the union bound)."""
    return [edge_rate(rule, n, ratio, 0.0, level) for n, level in zip(looks, look_levels(rule, looks))]


def plan_edge_rate(
    rule: Rule, looks: tuple[int, ...], ratio: float = math.inf, studies: int = PLAN_STUDIES, seed: int = 0
) -> tuple[float, list[float]]:
    """(the chance that the plan words a direction at some look, each look's share of it) for one
    comparison on the edge with the margin small against the SE (λ = 0), by simulating `studies` studies:
    seed effects N(0, 1), shared noise of variance 1/(n_max r), each look testing its first n_k seeds
    with the rule's own decision p at its level."""
    rng = np.random.default_rng(seed)
    v_shared = 0.0 if ratio == math.inf else 1.0 / (looks[-1] * ratio) if ratio > 0 else 1e6
    d = rng.standard_normal((studies, looks[-1])) + math.sqrt(v_shared) * rng.standard_normal((studies, 1))
    open_, crossed = np.ones(studies, bool), []
    for n, level in zip(looks, look_levels(rule, looks)):
        now = open_ & (rule.decision_p(d[:, :n], v_shared, 0.0) < level)
        crossed.append(float(now.mean()))
        open_ &= ~now
    return float(1 - open_.mean()), crossed
