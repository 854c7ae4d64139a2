"""A declared family decided look by look: which comparisons a sequential plan decides at each look,
with the family-wise error rate controlled across the comparisons and across the looks.

Each comparison carries two null hypotheses, in two families of their own: "the difference is within
the tie margin" (rejected: a direction) and "the difference is at least the equivalence margin"
(rejected: equivalent within ±m). Within each family Holm's procedure is run as the graphical
procedure it is (Bretz, Maurer, Brannath & Posch 2009: equal weights, a complete graph), and across
looks each hypothesis spends its current level alpha·w over the plan's information fractions with
the family's spending function (Maurer & Bretz 2013, "Multiple testing in group sequential trials
using graphical approaches", Statistics in Biopharmaceutical Research 5:311-320): a hypothesis
rejected at a look passes its weight on to the open hypotheses of its own family, whose boundaries
are then those of their raised level, at this look and the later ones. A comparison closed as
"equivalent" does not pass on its share of the difference family (its difference null was not
rejected), nor a direction its share of the equivalence family.

A p is compared with its look's level: under `beyond_tie_exact` the look's share of the spending
(study/stats/sequential.py: spent_levels; the t test is exact at its worst case, so the plan's error is at
most alpha by the union bound), under the older `beyond_tie` the normal-scale boundary carried to the
seed-level t by its nominal level (slightly liberal at few seeds). A comparison is decided at the first
look where either of its nulls is rejected (both may be, at that look); the decision is final, and the
study stops when every comparison is decided or the last look is reached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Optional, Sequence

import numpy as np

from study.stats.sequential import SPENDING, boundaries, spent_levels, t_boundary

Spending = Literal[tuple(SPENDING)]  # a spending function's name (study/stats/sequential.py)


@dataclass(frozen=True)
class Plan:
    """Seeds per configuration at each look (the last the most), and how each family spends its alpha
    (study/read/family.py checks them where it reads them)."""

    looks: tuple[int, ...]
    spending: Spending = "obrien-fleming"  # the difference tests'
    spending_equivalence: Spending = "obrien-fleming"
    alpha: float = 0.05
    alpha_equivalence: float = 0.05
    exact: bool = False  # each look's level its share of the spending (t scale), or the z boundary by level

    @property
    def fractions(self) -> tuple[float, ...]:
        """n_k / n_max (conservative: the shared test set's variance does not shrink)."""
        return tuple(n / self.looks[-1] for n in self.looks)


@dataclass(frozen=True)
class LookTests:
    """One look's unadjusted tests per declared comparison: the two-sided p beyond the tie margin, the
    TOST p at ±m and the sign of the mean difference."""

    decision_p: tuple[float, ...]
    equivalence_p: tuple[float, ...]
    sign: tuple[int, ...]


@dataclass(frozen=True)
class Decision:
    """Where a comparison was decided (`look` 0-based; None: not at the looks taken), its direction (+1 /
    -1, 0: none) and whether it was found equivalent."""

    look: Optional[int] = None
    seeds: Optional[int] = None
    direction: int = 0
    equivalent: bool = False
    # the nominal levels its difference and equivalence p faced at its decision (or, open, at the last
    # look taken): a p below its level rejects
    boundary: Optional[float] = None
    boundary_equivalence: Optional[float] = None


@dataclass(frozen=True)
class Graph:
    """One family's graphical procedure: each open hypothesis' weight and the transition weights."""

    weights: tuple[float, ...]  # 0 for a hypothesis no longer open
    transitions: tuple[tuple[float, ...], ...]

    @classmethod
    def holm(cls, m: int) -> Graph:
        """Holm's procedure as a graph: equal weights, each passing on to the others equally."""
        share = 1.0 / (m - 1) if m > 1 else 0.0
        return cls((1.0 / m,) * m, tuple(tuple(0.0 if i == j else share for j in range(m)) for i in range(m)))

    def without(self, j: int) -> Graph:
        """The graph once hypothesis j is rejected: its weight passed along its edges (Bretz et al.
        2009, algorithm 1)."""
        w, g = np.array(self.weights), np.array(self.transitions)
        new_w = w + w[j] * g[j]
        new_w[j] = 0.0
        m = len(w)
        new_g = np.zeros_like(g)
        for i in range(m):
            for k in range(m):
                if i != k and j not in (i, k):
                    denominator = 1.0 - g[i, j] * g[j, i]
                    new_g[i, k] = (g[i, k] + g[i, j] * g[j, k]) / denominator if denominator > 0 else 0.0
        return Graph(tuple(float(x) for x in new_w), tuple(tuple(float(x) for x in row) for row in new_g))

    def closed(self, j: int) -> Graph:
        """The graph once hypothesis j is closed unrejected: its weight is not passed on (nor to it)."""
        w, g = np.array(self.weights), np.array(self.transitions)
        w[j], g[:, j], g[j, :] = 0.0, 0.0, 0.0
        return Graph(tuple(float(x) for x in w), tuple(tuple(float(x) for x in row) for row in g))


def nominal_level(fractions: tuple[float, ...], alpha: float, spending: str, look: int, exact: bool = False) -> float:
    """The two-sided level of `look` for a hypothesis tested at level `alpha` (`exact`: its share of the
    spending; else the normal-scale boundary's nominal level)."""
    if alpha <= 0:
        return 0.0
    if exact:
        return spent_levels(fractions, alpha=alpha, spending=spending)[look]
    return boundaries(fractions, alpha=alpha, spending=spending).nominal[look]


def _level(graph: Graph, i: int, plan: Plan, look: int, equivalence: bool) -> float:
    """The nominal level hypothesis i's p must pass at `look` with its current weight."""
    alpha = (plan.alpha_equivalence if equivalence else plan.alpha) * graph.weights[i]
    if equivalence:  # TOST is two one-sided tests each at the level: a two-sided design at twice it, halved
        return nominal_level(plan.fractions, 2 * alpha, plan.spending_equivalence, look, plan.exact) / 2
    return nominal_level(plan.fractions, alpha, plan.spending, look, plan.exact)


def _reject_at_look(
    graph: Graph, p: Sequence[float], open_: set[int], plan: Plan, look: int, equivalence: bool
) -> tuple[Graph, Mapping[int, float], set[int]]:
    """Reject within one family at one look until nothing more is: (the graph after, the level each open
    hypothesis faced last: the one it was rejected at or did not pass, the rejected ones)."""
    levels = {i: _level(graph, i, plan, look, equivalence) for i in open_}
    rejected: set[int] = set()
    while True:
        found = next((i for i in sorted(open_ - rejected) if p[i] < levels[i]), None)
        if found is None:
            return graph, levels, rejected
        rejected.add(found)
        graph = graph.without(found)
        levels = {i: levels[i] if i in rejected else _level(graph, i, plan, look, equivalence) for i in open_}


def decide(plan: Plan, looks: Sequence[LookTests]) -> tuple[tuple[Decision, ...], int]:
    """(each comparison's decision, the looks taken) for the tests of each look taken so far, in order:
    the study stops at the first look where every comparison is decided (`looks` may run past it: the
    later ones are not read) or at the plan's last look."""
    m = len(looks[0].decision_p)
    difference, equivalence = Graph.holm(m), Graph.holm(m)
    decisions = [Decision() for _ in range(m)]
    open_ = set(range(m))
    for k, tests in enumerate(looks[: len(plan.looks)]):
        difference, levels, ahead = _reject_at_look(difference, tests.decision_p, open_, plan, k, equivalence=False)
        equivalence, levels_eq, within = _reject_at_look(
            equivalence, tests.equivalence_p, open_, plan, k, equivalence=True
        )
        for i in sorted(open_):
            look = k if i in ahead or i in within else None
            seeds = None if look is None else plan.looks[k]
            direction = tests.sign[i] if i in ahead else 0
            decisions[i] = Decision(look, seeds, direction, i in within, levels[i], levels_eq[i])
        for i in sorted(ahead | within):
            # the null of the other family that was not rejected closes without passing its weight on
            difference = difference if i in ahead else difference.closed(i)
            equivalence = equivalence if i in within else equivalence.closed(i)
        open_ -= ahead | within
        if not open_:
            break
    return tuple(decisions), k + 1


def repeated_interval(mean: float, se: float, df: float, nominal: float) -> tuple[float, float]:
    """A repeated confidence interval at a look (Jennison & Turnbull 1989): mean ± t_df(nominal)·SE,
    whose coverage holds at whichever look the study stops, unlike the plain 95% interval."""
    half = t_boundary(nominal, df) * se
    return mean - half, mean + half
