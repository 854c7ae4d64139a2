"""The decision rules (study/stats/rules.py) calibrated by simulating a declared family whole.

The family simulated is a study's declared rows as archived (its findings JSON, read by
study/read/archived.py: declared_rows): each row with its own seed SD s_d, the test set's shared
noise v_shared and each seed's own test-set noise v_int, taken as known. Per simulated study and row,
under the variance model of study/stats/seed_test.py: d_s = δ + e_s + w_s + u, e_s the seed effect
(normal, or t(3) scaled to unit variance) of variance s_d² - v_int, w_s ~ N(0, v_int) per seed,
u ~ N(0, v_shared) once for every seed; then the rule as the findings apply it: its decision p, Holm
over the family's rows, its direction test. Three properties (tests/study/simulate/test_calibration.py
checks them, with a mutation that fails each):

- false directions: how often a direction is worded for a row whose true difference is 0 or on an
  edge of the tie margin, the other rows at their observed means (Holm then passes the row nearly
  its whole α: the worst case); at most α/2;
- power: the chance of the observed direction for each row at its observed mean, by seeds; it must
  not fall as seeds are added;
- coverage: how often the 95% interval of a row covers its true difference.

`calibration_markdown` writes the figures for results/README.md (results/calibration.md), the across-set
rule's (study/simulate/across_calibration.py) after them."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping

import numpy as np

from study.read.archived import DeclaredRow, rows_on_test_set
from study.simulate import edge_rates
from study.simulate.across_calibration import across_markdown
from study.stats.rules import BEYOND_TIE, CURRENT, SEED_VETO, Rule
from study.stats.seed_test import ALPHA, SeedTest, standard_error, t_quantile
from study.stats.significance import holm_rows
from utils.markdown import table_head, table_row

STUDIES = 2000  # simulated families per setting
DISTRIBUTIONS = ("normal", "t3")
AGAINST_ZERO = replace(CURRENT, name="against_zero", against_tie=False)  # the rule without its margin
CALIBRATED = "results/demo/summary_findings.json"  # the family results/README.md's figures simulate


def draw(
    rows: list[DeclaredRow], means: list[float], n: int, dist: str, rng, studies: int = STUDIES
) -> list[np.ndarray]:
    """[studies, n] per-seed differences of each row under the variance model."""

    def effects() -> np.ndarray:  # unit variance
        if dist == "normal":
            return rng.standard_normal((studies, n))
        return rng.standard_t(3, (studies, n)) / math.sqrt(3.0)

    return [
        mean
        + math.sqrt(max(r.seed_sd**2 - r.v_int, 0.0)) * effects()
        + math.sqrt(r.v_int) * rng.standard_normal((studies, n))
        + math.sqrt(r.v_shared) * rng.standard_normal((studies, 1))
        for r, mean in zip(rows, means)
    ]


def decide(rule: Rule, rows: list[DeclaredRow], diffs: list[np.ndarray], tie: float) -> np.ndarray:
    """[STUDIES, rows] of +1/-1/0: the rule's direction for each row of each simulated family."""
    n = diffs[0].shape[-1]
    # what the rule's known variance reads of each row's seed test at n seeds (v_sent = v_shared + v_int/n)
    seed_tests = [
        SeedTest(n, r.mean, r.seed_sd, r.v_shared + r.v_int / n, None, None, None, None, r.v_shared, r.v_int)
        for r in rows
    ]
    p = np.stack([rule.decision_p(d, rule.known(t), tie) for d, t in zip(diffs, seed_tests)], -1)
    adjusted = holm_rows(p)
    return np.stack([rule.direction(d, adjusted[:, i], tie) for i, d in enumerate(diffs)], -1)


def false_directions(rule: Rule, rows: list[DeclaredRow], tie: float, n: int, dist: str) -> Mapping[str, float]:
    """{'0': rate, '±tie': rate}: how often a direction is worded for a row whose true difference is 0 or
    on either edge of the tie margin (mirror images, pooled), each row in turn, the others at their means."""
    rng = np.random.default_rng(n)
    said: dict[str, list] = {"0": [], "±tie": []}
    for delta in (0.0, tie, -tie):
        for i in range(len(rows)):
            means = [delta if j == i else r.mean for j, r in enumerate(rows)]
            said["0" if delta == 0 else "±tie"].append(
                decide(rule, rows, draw(rows, means, n, dist, rng), tie)[:, i] != 0
            )
    return {k: float(np.mean(v)) for k, v in said.items()}


def right_direction(rule: Rule, rows: list[DeclaredRow], tie: float, n: int, dist: str = "normal") -> list[float]:
    """The chance of each row's observed direction at the observed means, over n seeds."""
    said = decide(rule, rows, draw(rows, [r.mean for r in rows], n, dist, np.random.default_rng(100 + n)), tie)
    return [float(np.mean(said[:, i] == np.sign(r.mean))) for i, r in enumerate(rows)]


def coverage(rows: list[DeclaredRow], n: int, dist: str, count_v_int_twice: bool = False) -> float:
    """The share of studies whose 95% interval by the current rule (its df) covers the true difference
    (`rows` pooled, each at its mean); `count_v_int_twice` adds v_int/n to the SE again (the older rule's SE)."""
    covered = []
    for r, d in zip(rows, draw(rows, [r.mean for r in rows], n, dist, np.random.default_rng(200 + n))):
        known = r.v_shared + (r.v_int / n if count_v_int_twice else 0.0)
        mean, se, df = standard_error(d, known, welch=CURRENT.welch)
        covered.append(np.abs(mean - r.mean) <= np.array([t_quantile(1 - ALPHA / 2, x) for x in df]) * se)
    return float(np.mean(covered))


def mc_bound(rate: float, count: int) -> float:
    """`rate` plus two Monte-Carlo standard errors of a rate over `count` simulated studies."""
    return rate + 2 * math.sqrt(rate * (1 - rate) / count)


def _percent(x: float) -> str:
    return f"{x:.1%}"


def edge_markdown(rows: list[DeclaredRow], tie: float) -> list[str]:
    """The exact edge rates (both tails, no Monte Carlo) and the power each rule costs, as markdown lines."""
    test_set = rows_on_test_set(rows)
    head = [
        "seeds",
        f"`{CURRENT.name}`: worst case over r (λ = 0)",
        f"`{CURRENT.name}`: at the demo rows' parameters",
        f"`{BEYOND_TIE.name}` (Welch df): worst case over r (λ = 0)",
        f"`{BEYOND_TIE.name}`: at the demo rows' parameters",
    ]
    lines = [
        f'On an edge of the tie margin, one comparison alone, both tails counted ("ahead" or "behind" worded '
        f"at a true difference of +{tie:g} BLEU): exact integration over s_d² (`study/simulate/edge_rates.py`), "
        "worst case over r (the seed variance over n·v_shared) in "
        f"{', '.join('∞' if r == math.inf else f'{r:g}' for r in edge_rates.RATIOS)} with the margin small against "
        "the SE (λ = 0), and at the demo's test-set rows (their seed SD, v_shared and the tie margin); allowed 2.5%.",
        "",
        *table_head(head),
    ]

    def archived(rule: Rule, n: int) -> str:
        rates = []
        for r in test_set:
            ratio, tau = edge_rates.parameters(n, r.seed_sd, r.v_shared)
            rates.append(edge_rates.edge_rate(rule, n, ratio, tie / tau))
        return f"{min(rates):.2%}–{max(rates):.2%}"

    for n in edge_rates.SEEDS:
        worst = [edge_rates.worst_edge_rate(rule, n) for rule in (CURRENT, BEYOND_TIE)]
        at = ["∞" if r == math.inf else f"{r:g}" for _, r in worst]
        cells = [f"{worst[0][0]:.2%} (r = {at[0]})", archived(CURRENT, n), f"{worst[1][0]:.2%} (r = {at[1]})"]
        lines.append(table_row([n, *cells, archived(BEYOND_TIE, n)]))
    names = ", ".join(f"`{r.name}`" for r in test_set)
    lines += [
        "",
        f"What it costs: the chance of the observed direction, one comparison alone at α = 0.05 ({names}, at "
        "their archived means, seed SDs and v_shared), exact integration:",
        "",
        *table_head(["seeds", f"`{CURRENT.name}`", f"`{BEYOND_TIE.name}`"]),
    ]
    for n in (5, 8, 12, 20):
        cells = [
            " / ".join(f"{edge_rates.power(rule, n, r.mean, r.seed_sd, r.v_shared, tie):.2f}" for r in test_set)
            for rule in (CURRENT, BEYOND_TIE)
        ]
        lines.append(table_row([n, *cells]))
    return lines


def plans_markdown() -> list[str]:
    """The sequential plans under the current rule, look by look, as markdown lines."""
    se = math.sqrt(ALPHA / 2 * (1 - ALPHA / 2) / edge_rates.PLAN_STUDIES)
    lines = [
        f"A sequential plan under `{CURRENT.name}` (O'Brien–Fleming spending): each look's level is its share "
        "of α, so each look's chance of a direction on the edge (λ = 0, both tails) is exactly half its level at "
        "its worst case (r = ∞) and the plan's is at most α/2 = 2.5% by the union bound; simulated "
        f"({edge_rates.PLAN_STUDIES:,} studies per setting, one comparison, Monte-Carlo SE {se:.3%} at 2.5%) at "
        f"r = ∞, 1 and 0, beside `{BEYOND_TIE.name}`'s normal-scale boundaries carried to its Welch t by level.",
        "",
        *table_head(
            [
                "plan",
                "look: seeds",
                "level (decision p)",
                "exact at the look (r = ∞)",
                "simulated at the look (r = ∞ / 1 / 0)",
                f"`{BEYOND_TIE.name}`, z by level: simulated (r = ∞)",
            ]
        ),
    ]
    for looks in edge_rates.PLANS:
        plan = "-".join(map(str, looks))
        exact = edge_rates.look_edge_rates(CURRENT, looks)
        runs = [edge_rates.plan_edge_rate(CURRENT, looks, r) for r in (math.inf, 1.0, 0.0)]
        old = edge_rates.plan_edge_rate(BEYOND_TIE, looks)
        levels = edge_rates.look_levels(CURRENT, looks)
        for k, n in enumerate(looks):
            at = " / ".join(f"{run[1][k]:.2%}" for run in runs)
            cells = [f"{k + 1}: {n}", f"{levels[k]:.4f}", f"{exact[k]:.3%}", at, f"{old[1][k]:.2%}"]
            lines.append(table_row([plan, *cells]))
        whole = " / ".join(f"{run[0]:.2%}" for run in runs)
        lines.append(table_row([plan, "the plan", f"{sum(levels):.4f}", f"≤ {sum(exact):.3%}", whole, f"{old[0]:.2%}"]))
    return lines


def calibration_markdown(
    rows: list[DeclaredRow], tie: float, ns: tuple[int, ...] = (5, 10, 20, 40), name: str = CALIBRATED
) -> str:
    """results/calibration.md: the calibrations of the current rule (the older rules beside it) and of the
    across-set rule (study/simulate/across_calibration.py), as markdown tables."""
    return rules_calibration_markdown(rows, tie, ns, name) + "\n\n" + across_markdown(rows, tie, name)


def rules_calibration_markdown(
    rows: list[DeclaredRow], tie: float, ns: tuple[int, ...] = (5, 10, 20, 40), name: str = CALIBRATED
) -> str:
    """The decision rules' calibrations (one comparison per set), the page's part before the across-set rule's."""
    test_set = rows_on_test_set(rows)
    lines = [
        *edge_markdown(rows, tie),
        "",
        *plans_markdown(),
        "",
        f"Simulated: the {len(rows)} declared BLEU rows of `{name}` as archived, "
        f"{STUDIES:,} families per setting, tie margin {tie:g} BLEU, the current rule `{CURRENT.name}` "
        "(`study/simulate/calibration.py`).",
        "",
        *table_head(
            [
                "seeds",
                "direction worded at a true difference of 0 (normal / t(3))",
                "on an edge of the tie margin (normal / t(3); allowed 2.5%)",
                "against 0 instead of beyond the margin, on an edge (normal)",
            ]
        ),
    ]
    for n in ns:
        new = {d: false_directions(CURRENT, rows, tie, n, d) for d in DISTRIBUTIONS}
        zero = false_directions(AGAINST_ZERO, rows, tie, n, "normal")
        cells = [f"{_percent(new['normal'][at])} / {_percent(new['t3'][at])}" for at in ("0", "±tie")]
        lines.append(table_row([n, *cells, _percent(zero["±tie"])]))
    names = ", ".join(f"`{r.name}`" for r in test_set)
    lines += [
        "",
        *table_head(
            [
                "seeds",
                f"chance of the observed direction, {names}: `{CURRENT.name}`",
                "the same, `seed_veto`",
                "95% interval covers the true difference (normal / t(3))",
                "with v_int/n counted again (normal)",
            ]
        ),
    ]
    pick = [i for i, r in enumerate(rows) if r in test_set]
    for n in ns:
        new, old = right_direction(CURRENT, rows, tie, n), right_direction(SEED_VETO, rows, tie, n)
        cover = {d: coverage(test_set, n, d) for d in DISTRIBUTIONS}
        twice = coverage(test_set, n, "normal", count_v_int_twice=True)
        directions = [" / ".join(f"{chance[i]:.2f}" for i in pick) for chance in (new, old)]
        lines.append(
            table_row([n, *directions, f"{_percent(cover['normal'])} / {_percent(cover['t3'])}", _percent(twice)])
        )
    return "\n".join(lines)
