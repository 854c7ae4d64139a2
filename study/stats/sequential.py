"""Group-sequential boundaries: a study may look at its comparisons after n_1 < n_2 < ... < n_K seeds
and stop at the first look where they are decided, with the error rate spread over the looks by a
Lan-DeMets spending function (Lan & DeMets 1983; Jennison & Turnbull 2000, ch. 7 and 19).

`boundaries(fractions, alpha, spending)` gives the two-sided, symmetric boundaries on the normal
scale for looks at information fractions t_1 < ... < t_K = 1: at look k the test rejects when
|Z_k| >= c_k, where c_k spends f(t_k) - f(t_{k-1}) of each side's alpha/2, given that no earlier
look rejected. The crossing probabilities are computed by recursive numerical integration of the
score process S_k = Z_k sqrt(t_k), whose increments are independent N(0, t_k - t_{k-1})
(Armitage, McPherson & Rowe 1969), so no Monte Carlo noise enters a boundary; gsDesign's
`gsDesign(k=4, test.type=2, alpha=0.025, sfu=sfLDOF)` gives the same values
(tests/study/stats/test_sequential.py).

A seed-level test has few degrees of freedom at an early look, so a boundary is carried over by its
nominal level: look k rejects when the test's own p (its t distribution with the look's df) is
below 2(1 - Phi(c_k)) (`nominal_levels`). Under an O'Brien-Fleming shape a first look at 5 seeds
(4 df) then needs |t| > 25 and can practically never stop: choose a first look that can
(`t_boundary` says what it needs)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import optimize, stats

GRID_POINTS = 801  # Simpson's rule nodes over a continuation interval: boundaries exact to ~1e-6


def obrien_fleming(t: float, alpha: float) -> float:
    """Lan-DeMets' O'Brien-Fleming-type spending of one side's `alpha`: 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))."""
    return 0.0 if t <= 0 else float(2 - 2 * stats.norm.cdf(stats.norm.isf(alpha / 2) / math.sqrt(t)))


def pocock(t: float, alpha: float) -> float:
    """Lan-DeMets' Pocock-type spending of one side's `alpha`: alpha ln(1 + (e - 1) t)."""
    return alpha * math.log(1 + (math.e - 1) * t) if t > 0 else 0.0


SPENDING: dict[str, Callable[[float, float], float]] = {"obrien-fleming": obrien_fleming, "pocock": pocock}
SPENDING_NAMES = {"obrien-fleming": "O'Brien–Fleming", "pocock": "Pocock"}  # as the pages name them


def spending_text(spending: str, spending_equivalence: str) -> str:
    """A plan's spending functions in words: one name, or which family spends how."""
    if spending == spending_equivalence:
        return SPENDING_NAMES[spending]
    return f"{SPENDING_NAMES[spending]} (directions) / {SPENDING_NAMES[spending_equivalence]} (equivalence)"


@dataclass(frozen=True)
class Boundaries:
    """Two-sided symmetric boundaries: at look k reject when |Z| >= `z[k]`, i.e. when the two-sided p
    is below `nominal[k]`."""

    z: tuple[float, ...]

    @functools.cached_property  # computed once: a simulated family asks it at every look and level
    def nominal(self) -> tuple[float, ...]:
        return tuple(float(2 * stats.norm.sf(c)) for c in self.z)


def _continuation(bound: float, points: int = GRID_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Simpson's rule nodes and weights over (-bound, bound): where a look's score did not cross."""
    grid = np.linspace(-bound, bound, points)
    weights = np.ones(points)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return grid, weights * (grid[1] - grid[0]) / 3.0


def _crossing(grid: np.ndarray, mass: np.ndarray, sd: float, root_t: float, target: float) -> float:
    """The c with P(S_k >= c sqrt(t_k), no earlier crossing) = target, S_k = S_{k-1} + N(0, sd^2)."""

    def excess(c: float) -> float:
        return float(np.sum(mass * stats.norm.sf((c * root_t - grid) / sd))) - target

    return float(optimize.brentq(excess, 0.0, 40.0, xtol=1e-12)) if excess(0.0) > 0 else 0.0


@functools.lru_cache(maxsize=1024)  # pure, and asked again for each look and raised level of a family
def boundaries(fractions: tuple[float, ...], alpha: float = 0.05, spending: str = "obrien-fleming") -> Boundaries:
    """Two-sided boundaries spending `alpha` (alpha/2 per side) over looks at `fractions`."""
    if spending not in SPENDING:
        raise ValueError(f"spending {spending!r}: choose one of {', '.join(SPENDING)}")
    if not fractions or abs(fractions[-1] - 1.0) > 1e-12 or any(b <= a for a, b in zip(fractions, fractions[1:])):
        raise ValueError(f"information fractions {fractions}: increasing, the last 1")
    side, spend = alpha / 2, SPENDING[spending]
    z: list[float] = []
    previous, grid, mass = 0.0, np.zeros(0), np.zeros(0)  # S_{k-1}'s continuation nodes, density x weight
    for t in fractions:
        target = spend(t, side) - spend(previous, side)  # this look's share of one side
        sd = math.sqrt(t - previous)
        c = float(stats.norm.isf(target)) if not z else _crossing(grid, mass, sd, math.sqrt(t), target)
        z.append(c)
        new_grid, weights = _continuation(c * math.sqrt(t))
        if len(z) == 1:  # S_1 ~ N(0, t_1)
            density = stats.norm.pdf(new_grid / sd) / sd
        else:  # S_k = S_{k-1} + N(0, t_k - t_{k-1}), from where S_{k-1} did not cross
            density = stats.norm.pdf((new_grid[:, None] - grid[None, :]) / sd) @ mass / sd
        grid, mass, previous = new_grid, density * weights, t
    return Boundaries(tuple(z))


@functools.lru_cache(maxsize=1024)
def spent_levels(
    fractions: tuple[float, ...], alpha: float = 0.05, spending: str = "obrien-fleming"
) -> tuple[float, ...]:
    """Each look's two-sided level on the t scale: its share of the spending, 2 (f(t_k) - f(t_{k-1})) of
    one side's alpha/2. A test whose chance of crossing at a look is at most its level (the seed test of
    `beyond_tie_exact`, exact at its worst case) then crosses at some look in at most alpha of studies,
    whatever the correlation between looks (the union bound; what it costs against the normal-scale
    boundaries: results/sequential_calibration.md)."""
    boundaries(fractions, alpha, spending)  # (the same checks of the fractions and the spending's name)
    spend, side = SPENDING[spending], alpha / 2
    points = (0.0, *fractions)
    return tuple(2 * (spend(t, side) - spend(previous, side)) for previous, t in zip(points, points[1:]))


def t_boundary(nominal: float, df: float) -> float:
    """The |t| a seed-level test with `df` degrees of freedom needs to reach a look's nominal two-sided level."""
    return float(stats.t.isf(nominal / 2, df))
