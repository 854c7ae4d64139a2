"""A sequential declared family (study/stats/sequential_family.py) calibrated by simulating it whole.

The family simulated is a declared family file's plan (its looks n_1 < ... < n_K, each family of
tests' spending, its tie margin and equivalence margin m) over the declared sacreBLEU test-set rows
of an archived findings JSON (study/read/archived.py: declared_rows): each row with its own seed SD s_d,
the test set's shared noise v_shared and each seed's own test-set noise v_int, taken as known. Per
simulated family and row, under the variance model of study/stats/seed_test.py, n_K per-seed differences
d_s = δ + e_s + w_s + u are drawn (study/calibration.draw: e_s the seed effect, normal or t(3)
scaled to unit variance, of variance s_d² - v_int; w_s ~ N(0, v_int) per seed; u ~ N(0, v_shared)
once per family and row, shared by every look). Look k reads the first n_k seeds with the harness's
own tests (study/rules.BEYOND_TIE, known = v_shared): the decision p beyond the tie margin, the TOST
p at ±m and the sign of the mean; `study.stats.sequential_family.decide` then decides the family look by
look (Holm as a graph, each hypothesis' level spent over the looks, the study stopping once every
comparison is decided), one call per family. Beside it, the fixed design on the same draws: one look
at the plan's n_K seeds (`Plan((n_K,))`, which is Holm's procedure). Properties
(tests/study/simulate/test_sequential_calibration.py checks them, with a mutation that fails them):

- false directions: how often a direction is worded, at any look, for a row whose true difference
  lies on an edge of the tie margin (±tie pooled), each row in turn, the others at their observed
  means (found ahead or behind, they pass the row their α); at most α/2;
- false equivalence: how often a row whose true difference is ±m is worded "equivalent", each row in
  turn, the others at their observed means, and all at 0 (found equivalent, they pass the row their
  α: the worst case); at most α;
- power and cost: the chance of each row's observed direction at the observed means, and the seeds
  per encoding the family runs on average before it stops.

The mutation, every look tested at the hypothesis' full level (`without_spending`), words a false
direction in about 3.5% of the demo's families and a false equivalence in about 6.4% at the worst
case. With the others at their observed means it stays near 3.9% for equivalence, below α: they are
rarely found equivalent (a row keeps α/2), and a row at ±m is mostly closed first by a direction
beyond the tie margin, after which it is never worded equivalent.

`sequential_calibration_markdown` writes the figures for the study page."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

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
    return Plan((plan.looks[-1],), plan.spending, plan.spending_equivalence, plan.alpha, plan.alpha_equivalence)


def run(plan: Plan, rows: Sequence[DeclaredRow], diffs: Sequence[np.ndarray], tie: float, margin: float) -> Outcome:
    """Each family of `diffs` (per row [studies, >= n_K] per-seed differences) decided by `plan`, the
    tests of look k on the first n_k seeds: vectorised over families, then one `decide` per family."""
    p_dir, p_eq, sign = [], [], []  # each [looks, rows, studies]
    for n in plan.looks:
        seen = [d[:, :n] for d in diffs]
        p_dir.append([BEYOND_TIE.decision_p(d, r.v_shared, tie) for d, r in zip(seen, rows)])
        p_eq.append([BEYOND_TIE.equivalence_p(d, r.v_shared, margin) for d, r in zip(seen, rows)])
        sign.append([np.sign(d.mean(-1)).astype(int) for d in seen])
    p_dir, p_eq, sign = (np.transpose(np.asarray(a), (2, 0, 1)).tolist() for a in (p_dir, p_eq, sign))
    studies = len(p_dir)
    direction = np.zeros((studies, len(rows)), dtype=int)
    equivalent = np.zeros((studies, len(rows)), dtype=bool)
    seeds = np.zeros(studies, dtype=int)
    for s in range(studies):
        looks = [LookTests(tuple(a), tuple(b), tuple(c)) for a, b, c in zip(p_dir[s], p_eq[s], sign[s])]
        decisions, taken = decide(plan, looks)
        direction[s] = [d.direction for d in decisions]
        equivalent[s] = [d.equivalent for d in decisions]
        seeds[s] = plan.looks[taken - 1]
    return Outcome(direction, equivalent, seeds)


def simulate(
    plans: Sequence[Plan],
    rows: Sequence[DeclaredRow],
    means: Sequence[float],
    tie: float,
    margin: float,
    dist: str,
    studies: int,
    rng,
) -> list[Outcome]:
    """`studies` families drawn at `means` (the most seeds any plan reads), each plan deciding the same draws."""
    diffs = draw(list(rows), list(means), max(p.looks[-1] for p in plans), dist, rng, studies)
    return [run(plan, rows, diffs, tie, margin) for plan in plans]


def edge_rates(
    plans: Sequence[Plan],
    rows: Sequence[DeclaredRow],
    tie: float,
    margin: float,
    dist: str,
    studies: int,
    equivalence: bool,
    others: Optional[float] = None,
    seed: Optional[int] = None,
) -> list[float]:
    """Per plan, how often a row whose true difference is on an edge is worded: a direction at ±tie
    (`equivalence` False) or "equivalent" at ±m (True); each row in turn, the others at their observed
    means (`others` None) or all at `others`, the edges and rows pooled (2 x rows x `studies` families)."""
    property_ = "equivalence" if equivalence else "direction"
    rng = np.random.default_rng([SEEDS[property_] if seed is None else seed, DISTRIBUTIONS.index(dist)])
    edge = margin if equivalence else tie
    said: list[list[np.ndarray]] = [[] for _ in plans]
    for delta in (edge, -edge):
        for i in range(len(rows)):
            means = [delta if j == i else r.mean if others is None else others for j, r in enumerate(rows)]
            for out, outcome in zip(said, simulate(plans, rows, means, tie, margin, dist, studies, rng)):
                out.append(outcome.equivalent[:, i] if equivalence else outcome.direction[:, i] != 0)
    return [float(np.mean(s)) for s in said]


@contextlib.contextmanager
def without_spending() -> Iterator[None]:
    """Within it, `decide` tests every look at a hypothesis' full level (no alpha spent over the looks):
    the mutation the calibration must fail."""
    spent = sequential_family.nominal_level
    sequential_family.nominal_level = lambda fractions, alpha, spending, look: alpha
    try:
        yield
    finally:
        sequential_family.nominal_level = spent


def power(
    plans: Sequence[Plan],
    rows: Sequence[DeclaredRow],
    tie: float,
    margin: float,
    dist: str,
    studies: int,
    seed: Optional[int] = None,
) -> list[tuple[list[float], float]]:
    """Per plan, (the chance of each row's observed direction, the mean seeds per encoding) at the
    observed means."""
    rng = np.random.default_rng([SEEDS["power"] if seed is None else seed, DISTRIBUTIONS.index(dist)])
    outcomes = simulate(plans, rows, [r.mean for r in rows], tie, margin, dist, studies, rng)
    return [
        ([float(np.mean(o.direction[:, i] == np.sign(r.mean))) for i, r in enumerate(rows)], float(np.mean(o.seeds)))
        for o in outcomes
    ]


def _shown(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _pair(a: float, b: float, fmt: str) -> str:
    return f"{a:{fmt}} / {b:{fmt}}"


def sequential_calibration_markdown(
    rows: Sequence[DeclaredRow], family: Family, name: str = CALIBRATED, studies: int = STUDIES
) -> str:
    """The error rates, power and seeds of `family`'s sequential plan beside the fixed design, on the
    declared test-set rows of an archived findings JSON (study/read/archived.py: declared_rows; shown as
    `name`), as markdown tables."""
    plan, rows, family_path = family.plan, rows_on_test_set(rows), family.path
    if plan is None:
        raise ValueError(f"{family_path}: no sequential plan (looks) to calibrate")
    tie, margin = family.tie_margin.sacreBLEU, family.equivalence.sacreBLEU
    plans = (plan, fixed(plan))
    looks = "-".join(str(n) for n in plan.looks)
    spending = spending_text(plan.spending, plan.spending_equivalence)
    lines = [
        f"Simulated: the family of `{_shown(family_path)}` (looks at {looks} seeds, {spending} spending) on "
        f"its {len(rows)} declared comparisons, each with the seed SD, v_shared and v_int of its test-set "
        f"row in `{name}`, under d_s = δ + e_s + w_s + u (seed effects normal or t(3)); "
        f"{studies:,} families per setting, each decided look by look with the harness's own tests and "
        f"`study.sequential_family.decide`, beside the fixed design (one look at {plan.looks[-1]} seeds: "
        f"Holm) on the same draws (`study/sequential_calibration.py`; the test beside it holds the sequential "
        "rates to the allowed rate plus 2 Monte-Carlo SE).",
        "",
        *table_head(
            [
                "worded where it is not true (each comparison in turn)",
                f"sequential {looks} (normal / t(3))",
                f"fixed {plan.looks[-1]} (normal / t(3))",
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
        rates = {d: edge_rates(plans, rows, tie, margin, d, studies, equivalence, others) for d in DISTRIBUTIONS}
        with without_spending():
            unspent = edge_rates(plans[:1], rows, tie, margin, "normal", studies, equivalence, others)[0]
        cells = [_pair(rates["normal"][k], rates["t3"][k], ".1%") for k in range(len(plans))]
        lines.append(table_row([what, *cells[:2], f"{unspent:.1%}", f"{allowed:.1%}"]))
    found = {d: power(plans, rows, tie, margin, d, studies) for d in DISTRIBUTIONS}
    lines += [
        "",
        *table_head(
            ["at the observed means", f"sequential {looks} (normal / t(3))", f"fixed {plan.looks[-1]} (normal / t(3))"]
        ),
    ]
    for i, r in enumerate(rows):
        cells = [_pair(found["normal"][k][0][i], found["t3"][k][0][i], ".2f") for k in range(len(plans))]
        lines.append(table_row([f"chance of the observed direction, `{r.name}` ({r.mean:+.2f} BLEU)", *cells[:2]]))
    cells = [_pair(found["normal"][k][1], found["t3"][k][1], ".1f") for k in range(len(plans))]
    lines.append(table_row(["expected seeds per encoding", *cells[:2]]))
    return "\n".join(lines) + "\n"
