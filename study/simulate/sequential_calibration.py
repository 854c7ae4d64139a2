"""A sequential declared family (study/stats/sequential_family.py) calibrated by simulating it whole.

The family simulated is a declared family file's plan (its looks n_1 < ... < n_K, each family of
tests' spending, its tie margin and equivalence margin m) over the declared sacreBLEU test-set rows
of an archived findings JSON, drawn as study/simulate/calibration.py draws them (n_K per-seed
differences per family and row under the variance model, u shared by every look). Look k reads the
first n_k seeds with the harness's own tests (study/rules.BEYOND_TIE, known = v_shared): the decision
p beyond the tie margin, the TOST p at ±m and the sign of the mean; `study.stats.sequential_family.
decide` then decides the family look by look (Holm as a graph, each hypothesis' level spent over the
looks, the study stopping once every comparison is decided). Beside it, the fixed design on the same
draws: one look at the plan's n_K seeds (`Plan((n_K,))`, which is Holm's procedure). Properties
(tests/study/simulate/test_sequential_calibration.py checks them, with a mutation that fails them):

- false directions: how often a direction is worded, at any look, for a row whose true difference
  lies on an edge of the tie margin (±tie pooled), each row in turn, the others at their observed
  means (found ahead or behind, they pass the row their α); at most α/2;
- false equivalence: how often a row whose true difference is ±m is worded "equivalent", each row in
  turn, the others at their observed means, and all at 0 (found equivalent, they pass the row their
  α: the worst case); at most α;
- power and cost: the chance of each row's observed direction at the observed means, and the seeds
  per encoding the family runs on average before it stops.

The mutation, every look tested at the hypothesis' full level (`without_spending`), fails the false
directions and the worst case, not equivalence with the others at their observed means: they are
rarely found equivalent (a row keeps α/2), and a row at ±m is mostly closed first by a direction."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ContextManager, Optional, Sequence
from unittest import mock

import numpy as np

from study.read.archived import DeclaredRow, rows_on_test_set
from study.read.family import Family
from study.simulate.calibration import CALIBRATED, DISTRIBUTIONS, draw
from study.stats import sequential_family
from study.stats.rules import BEYOND_TIE
from study.stats.seed_test import ALPHA
from study.stats.sequential import spending_text
from study.stats.sequential_family import LookTests, Plan, decide
from utils.markdown import table_head, table_row

STUDIES = 10_000  # simulated families per setting on the page
ROOT = Path(__file__).resolve().parents[2]
SEEDS = {"direction": 1, "equivalence": 2, "power": 3}  # each property's rng seed (with the distribution's)


@dataclass(frozen=True)
class Outcome:
    """What each simulated family concluded: [studies, rows] directions (+1 / -1 / 0) and "equivalent",
    and [studies] the seeds per encoding it ran (the seeds of the look where it stopped)."""

    direction: np.ndarray
    equivalent: np.ndarray
    seeds: np.ndarray


def fixed(plan: Plan) -> Plan:
    """The fixed design beside a sequential plan: one look, at its most seeds (Holm's procedure)."""
    return replace(plan, looks=plan.looks[-1:])


def run(plan: Plan, rows: Sequence[DeclaredRow], diffs: Sequence[np.ndarray], tie: float, margin: float) -> Outcome:
    """Each family of `diffs` (per row [studies, >= n_K]) decided by `plan`, look k on the first n_k seeds."""
    p_dir, p_eq, sign = [], [], []  # each [looks, rows, studies]
    for n in plan.looks:
        seen = [d[:, :n] for d in diffs]
        p_dir.append([BEYOND_TIE.decision_p(d, r.v_shared, tie) for d, r in zip(seen, rows)])
        p_eq.append([BEYOND_TIE.equivalence_p(d, r.v_shared, margin) for d, r in zip(seen, rows)])
        sign.append([np.sign(d.mean(-1)).astype(int) for d in seen])
    tests = zip(*(np.transpose(np.asarray(a), (2, 0, 1)).tolist() for a in (p_dir, p_eq, sign)))
    families = [decide(plan, [LookTests(*map(tuple, look)) for look in zip(*family)]) for family in tests]
    return Outcome(
        np.array([[d.direction for d in decisions] for decisions, _ in families]),
        np.array([[d.equivalent for d in decisions] for decisions, _ in families]),
        np.array([plan.looks[taken - 1] for _, taken in families]),
    )


@dataclass(frozen=True)
class Simulation:
    """`plans` deciding the same simulated families of the declared `rows`, with the family's tie
    margin and equivalence margin m, `studies` families per setting."""

    plans: Sequence[Plan]
    rows: Sequence[DeclaredRow]
    tie: float
    margin: float
    studies: int

    def outcomes(self, means: Sequence[float], dist: str, rng) -> list[Outcome]:
        """Families drawn at `means` (the most seeds any plan reads), each plan deciding the same draws."""
        diffs = draw(list(self.rows), list(means), max(p.looks[-1] for p in self.plans), dist, rng, self.studies)
        return [run(plan, self.rows, diffs, self.tie, self.margin) for plan in self.plans]

    def edge_rates(
        self, dist: str, equivalence: bool, others: Optional[float] = None, seed: Optional[int] = None
    ) -> list[float]:
        """Per plan, how often a row whose true difference is on an edge is worded: a direction at ±tie
        (`equivalence` False) or "equivalent" at ±m (True); each row in turn, the others at their
        observed means (`others` None) or all at `others`, the edges and rows pooled."""
        seed = SEEDS["equivalence" if equivalence else "direction"] if seed is None else seed
        rng = np.random.default_rng([seed, DISTRIBUTIONS.index(dist)])
        edge = self.margin if equivalence else self.tie
        said: list[list[np.ndarray]] = [[] for _ in self.plans]
        for delta in (edge, -edge):
            for i in range(len(self.rows)):
                means = [delta if j == i else r.mean if others is None else others for j, r in enumerate(self.rows)]
                for out, outcome in zip(said, self.outcomes(means, dist, rng)):
                    out.append(outcome.equivalent[:, i] if equivalence else outcome.direction[:, i] != 0)
        return [float(np.mean(s)) for s in said]

    def power(self, dist: str, seed: Optional[int] = None) -> list[tuple[list[float], float]]:
        """Per plan, (the chance of each row's observed direction, the mean seeds per encoding)."""
        rng = np.random.default_rng([SEEDS["power"] if seed is None else seed, DISTRIBUTIONS.index(dist)])
        return [
            (
                [float(np.mean(o.direction[:, i] == np.sign(r.mean))) for i, r in enumerate(self.rows)],
                float(np.mean(o.seeds)),
            )
            for o in self.outcomes([r.mean for r in self.rows], dist, rng)
        ]


def without_spending() -> ContextManager:
    """Within it, `decide` tests every look at a hypothesis' full level (no alpha spent over the looks):
    the mutation the calibration must fail."""
    return mock.patch.object(sequential_family, "nominal_level", lambda fractions, alpha, spending, look, exact: alpha)


def _pair(a: float, b: float, fmt: str) -> str:
    return f"{a:{fmt}} / {b:{fmt}}"


def sequential_calibration_markdown(
    rows: Sequence[DeclaredRow], family: Family, name: str = CALIBRATED, studies: int = STUDIES
) -> str:
    """The error rates, power and seeds of `family`'s plan beside the fixed design, as markdown tables."""
    plan = family.plan
    if plan is None:
        raise ValueError(f"{family.path}: no sequential plan (looks) to calibrate")
    path = Path(family.path).resolve()
    tie, margin = family.tie_margin.sacreBLEU, family.equivalence.sacreBLEU
    both = Simulation((plan, fixed(plan)), rows_on_test_set(rows), tie, margin, studies)
    looks, spending = "-".join(str(n) for n in plan.looks), spending_text(plan.spending, plan.spending_equivalence)
    columns = [f"{design} (normal / t(3))" for design in (f"sequential {looks}", f"fixed {plan.looks[-1]}")]
    lines = [
        f"Simulated: the family of `{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}` (looks "
        f"at {looks} seeds, {spending} spending) on its {len(both.rows)} declared comparisons, each with the seed "
        f"SD, v_shared and v_int of its test-set row in `{name}`, under d_s = δ + e_s + w_s + u (seed effects "
        f"normal or t(3)); {studies:,} families per setting, each decided look by look with the harness's own "
        f"tests and `study.sequential_family.decide`, beside the fixed design (one look at {plan.looks[-1]} "
        "seeds: Holm) on the same draws (`study/sequential_calibration.py`; the test beside it holds the "
        "sequential rates to the allowed rate plus 2 Monte-Carlo SE).",
        "",
        *table_head(
            [
                "worded where it is not true (each comparison in turn)",
                *columns,
                f"{looks} with every look at the full α, no spending (normal)",
                "allowed",
            ]
        ),
    ]
    at_means = "the others at their observed means"
    for equivalence, others, what, allowed in (
        (False, None, f"a direction on an edge of the tie margin (±{tie:g} BLEU), {at_means}", ALPHA / 2),
        (True, None, f'"equivalent" at ±m (±{margin:g} BLEU), {at_means}', ALPHA),
        (True, 0.0, '"equivalent" at ±m, the others at 0 (found equivalent, they pass their α on)', ALPHA),
    ):
        rates = {d: both.edge_rates(d, equivalence, others) for d in DISTRIBUTIONS}
        with without_spending():
            unspent = replace(both, plans=(plan,)).edge_rates("normal", equivalence, others)[0]
        cells = [_pair(rates["normal"][k], rates["t3"][k], ".1%") for k in range(2)]
        lines.append(table_row([what, *cells, f"{unspent:.1%}", f"{allowed:.1%}"]))
    found = {d: both.power(d) for d in DISTRIBUTIONS}
    lines += ["", *table_head(["at the observed means", *columns])]
    for i, r in enumerate(both.rows):
        cells = [_pair(found["normal"][k][0][i], found["t3"][k][0][i], ".2f") for k in range(2)]
        lines.append(table_row([f"chance of the observed direction, `{r.name}` ({r.mean:+.2f} BLEU)", *cells]))
    cells = [_pair(found["normal"][k][1], found["t3"][k][1], ".1f") for k in range(2)]
    lines.append(table_row(["expected seeds per encoding", *cells]))
    return "\n".join(lines) + "\n"
