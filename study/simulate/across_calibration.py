"""The across-set rule (study/stats/across_sets.py) calibrated by simulation: one comparison scored on K
declared test sets, at the archived demo's test-set rows.

Per simulated study, set k and seed s: d_sk = δ_k + s_d z_sk + u_k, s_d the row's archived seed SD (seed
effect and the seed's own test-set noise together), z_s· a seed's K standardised deviations with
correlation ρ between the sets (the same two trained models scored on each; normal, or multivariate
t(3) scaled to unit variance), u_k ~ N(0, v_shared) each set's own shared test-set noise, at the row's
archived v_shared. Each set is read by the current rule (its decision p beyond the tie margin, known
variance v_shared), the sets together by across_sets at α, one comparison alone (Holm over a family
passes its last comparison the whole α: the worst case). Mirrored settings (every δ negated) are
pooled. Three properties (tests/study/simulate/test_across_calibration.py, a mutation failing each):

- wrong wording on an edge of the tie margin, a reading whose claim is false there ("ahead across" while
  a set is at most +tie, "depends" while no set lies below -tie, ...) in at most α/2: one set on the +tie
  edge and the others far ahead (100 of their mean's SEs; the worst case for a direction across), and
  K - 1 sets on the -tie edge with one far ahead (the worst case for "depends"); mutation: the union
  (the sets' smallest decision p instead of the largest);
- no direction across where the sets go opposite ways (one at the archived mean, the others at its
  negative): at most α/2; mutation: the sets' signs ignored (the mean over sets' sign, the largest p);
- power: the chance of the right direction across at the archived mean on every set, and with one set
  at half of it, rises with seeds.

`across_markdown` writes the figures for results/calibration.md.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np

from study.read.archived import DeclaredRow, rows_on_test_set
from study.stats.across_sets import DEPENDS, across_arrays, words
from study.stats.rules import CURRENT
from study.stats.seed_test import ALPHA
from utils.markdown import table_head, table_row

STUDIES = 4000  # simulated studies per setting of power and of the mutations (mirrors pooled)
EDGE_STUDIES = 20_000  # per setting of wrong wording (Monte-Carlo SE of a 2.5% rate: 0.11 points)
SEEDS = (3, 5, 8, 12, 20)
SETS = (2, 3)
RHOS = (0.0, 0.5, 0.9)  # correlation of a seed's differences between the sets
DISTRIBUTIONS = ("normal", "t3")
FAR = 100.0  # "far" from the margin, in the mean's true SEs
Reading = Callable[..., tuple]  # across_arrays or a mutation of it


def union(means, decision_p, equivalence_p):
    """Mutation: the union over sets (the smallest decision p) instead of the intersection."""
    direction, _, eq, depends_p = across_arrays(means, decision_p, equivalence_p)
    return direction, np.asarray(decision_p).min(-1), eq, depends_p


def signless(means, decision_p, equivalence_p):
    """Mutation: the sets' signs ignored (the direction of the mean over sets, the largest p, no "depends")."""
    means = np.asarray(means)
    _, _, eq, depends_p = across_arrays(means, decision_p, equivalence_p)
    return np.sign(means.mean(-1)).astype(int), np.asarray(decision_p).max(-1), eq, np.ones_like(depends_p)


def true_se(row: DeclaredRow, n: int) -> float:
    return math.sqrt(row.seed_sd**2 / n + row.v_shared)


def draw(deltas: Sequence[float], row: DeclaredRow, n: int, dist: str, rho: float, rng, studies: int) -> np.ndarray:
    """[studies, K, n] per-seed differences on K sets (each its own shared noise), mirrors in the second half."""
    k = len(deltas)
    z = math.sqrt(rho) * rng.standard_normal((studies, 1, n)) + math.sqrt(1 - rho) * rng.standard_normal(
        (studies, k, n)
    )
    if dist == "t3":  # multivariate t(3): one chi-square scale per seed, unit variance
        z /= np.sqrt(rng.chisquare(3, (studies, 1, n)) / 3) * math.sqrt(3.0)
    sign = np.where(np.arange(studies) < studies // 2, 1.0, -1.0)[:, None, None]
    mean = sign * np.asarray(deltas, dtype=np.float64)[None, :, None]
    return mean + row.seed_sd * z + math.sqrt(row.v_shared) * rng.standard_normal((studies, k, 1))


def read(diffs: np.ndarray, row: DeclaredRow, tie: float, across: Reading = across_arrays) -> np.ndarray:
    """[studies] of across_sets.words at α: +1 / -1 ahead / behind across, DEPENDS, 0 neither."""
    p = CURRENT.decision_p(diffs, row.v_shared, tie)
    direction, p_across, _, depends_p = across(diffs.mean(-1), p, np.ones_like(p))
    return words(direction, p_across, depends_p, ALPHA)


def wrong(said: np.ndarray, deltas: np.ndarray, tie: float) -> np.ndarray:
    """Where a reading's claim is false for true differences `deltas [studies, K]`."""
    return np.where(
        said == 1,
        (deltas <= tie).any(-1),
        np.where(
            said == -1,
            (deltas >= -tie).any(-1),
            (said == DEPENDS) & ((deltas <= tie).all(-1) | (deltas >= -tie).all(-1)),
        ),
    )


def simulate(
    setting: str,
    row: DeclaredRow,
    tie: float,
    n: int,
    k: int,
    dist: str,
    rho: float,
    studies: Optional[int] = None,
    across: Reading = across_arrays,
) -> float:
    """One setting's rate: 'same' (one set on the +tie edge, the others far ahead) and 'other' (K - 1 sets
    on the -tie edge, one far ahead): wrong wording; with the sets the opposite ways at the archived mean,
    'opposite' (a direction across) and 'depends'; 'power' / 'half' (the right direction across, every set
    at the mean / one at half of it). `studies`: EDGE_STUDIES for the first three, else STUDIES."""
    if studies is None:
        studies = EDGE_STUDIES if setting in ("same", "other", "opposite") else STUDIES
    far, m = FAR * true_se(row, n), abs(row.mean)
    deltas = {
        "same": [far] * (k - 1) + [tie],
        "other": [far] + [-tie] * (k - 1),
        "opposite": [m] + [-m] * (k - 1),
        "depends": [m] + [-m] * (k - 1),
        "power": [row.mean] * k,
        "half": [row.mean / 2] + [row.mean] * (k - 1),
    }[setting]
    names = ("same", "other", "opposite", "depends", "power", "half")
    key = [names.index(setting), n, k, DISTRIBUTIONS.index(dist), RHOS.index(rho), int(1e6 * m)]
    diffs = draw(deltas, row, n, dist, rho, np.random.default_rng(key), studies)
    said = read(diffs, row, tie, across)
    sign = np.where(np.arange(studies) < studies // 2, 1, -1)
    if setting in ("same", "other"):
        return float(wrong(said, sign[:, None] * np.asarray(deltas), tie).mean())
    if setting == "opposite":
        return float(np.isin(said, (1, -1)).mean())
    if setting == "depends":
        return float((said == DEPENDS).mean())
    return float((said == sign * np.sign(row.mean)).mean())


def worst(
    setting: str,
    rows: Sequence[DeclaredRow],
    tie: float,
    n: int,
    k: int,
    dist: str,
    studies: Optional[int] = None,
    across: Reading = across_arrays,
) -> float:
    """The largest rate over ρ and the rows."""
    return max(simulate(setting, r, tie, n, k, dist, rho, studies, across) for r in rows for rho in RHOS)


def across_markdown(rows: list[DeclaredRow], tie: float, name: str) -> str:
    """The across-set rule's calibration at the test-set rows of `name`'s family, as markdown."""
    test_set = rows_on_test_set(rows)
    return "\n".join([*_wrong_lines(test_set, tie, name), "", *_power_lines(test_set, tie)]) + "\n"


def _wrong_lines(test_set: list[DeclaredRow], tie: float, name: str) -> list[str]:
    se = math.sqrt(ALPHA / 2 * (1 - ALPHA / 2) / EDGE_STUDIES)
    names = ", ".join(f"`{r.name}`" for r in test_set)
    lines = [
        f"Across the declared test sets (`{CURRENT.name}` on each set, read across by `study/stats/across_sets.py`: "
        "a direction across where every set's mean goes that way and the largest of the sets' decision p passes, "
        '"depends on the test set" where the signs differ and the smaller p on each side passes): simulated '
        f"(`study/simulate/across_calibration.py`) for one comparison on K sets at the test-set rows of `{name}` "
        f"({names}: each set at the row's seed SD and its own shared noise v_shared), the seeds' differences "
        f"correlated between the sets by ρ = {' / '.join(f'{r:g}' for r in RHOS)}, seed effects normal or "
        f"multivariate t(3); mirrored settings pooled, α = {ALPHA:g}, tie margin {tie:g} BLEU, one comparison "
        "alone.",
        "",
        f"Wrong wording ({EDGE_STUDIES:,} studies per setting, the largest rate over ρ and the rows; allowed "
        f"2.5%, Monte-Carlo SE of a 2.5% rate {se:.2%}): a reading whose claim is false on an edge of the tie "
        'margin ("ahead across" with a set at +tie, "depends" with no set below −tie), with one set on the '
        f"+tie edge and the others far ahead ({FAR:g} SEs: the worst case for a direction across) and with "
        'K − 1 sets on the −tie edge and one far ahead (the worst case for "depends"); a direction across '
        f"where the sets go opposite ways at the archived mean; and the two mutations ({STUDIES:,} studies).",
        "",
        *table_head(
            [
                "seeds",
                "sets",
                "one set on the +tie edge (normal / t(3))",
                "K − 1 sets on the −tie edge (normal / t(3))",
                "opposite ways: a direction across (normal / t(3))",
                "the union (smallest p) instead, one set on the +tie edge (normal)",
                "signs ignored, opposite ways (normal)",
            ]
        ),
    ]
    for n in SEEDS:
        for k in SETS:
            cells = [
                " / ".join(f"{worst(s, test_set, tie, n, k, d):.2%}" for d in DISTRIBUTIONS)
                for s in ("same", "other", "opposite")
            ]
            cells += [
                f"{worst('same', test_set, tie, n, k, 'normal', across=union, studies=STUDIES):.2%}",
                f"{worst('opposite', test_set, tie, n, k, 'normal', across=signless, studies=STUDIES):.2%}",
            ]
            lines.append(table_row([n, k, *cells]))
    return lines


def _power_lines(test_set: list[DeclaredRow], tie: float) -> list[str]:
    lines = [
        "Power: the chance of the right direction across (every set at the row's archived mean, or one set at "
        'half of it), and of "depends on the test set" where one set is at the mean and the others at its '
        f"negative; {STUDIES:,} studies per setting, ρ = " + " / ".join(f"{r:g}" for r in RHOS) + " in each cell.",
        "",
        *table_head(
            [
                "seeds",
                "sets",
                "comparison",
                "every set at the mean (normal)",
                "(t(3))",
                "one set at half (normal)",
                "(t(3))",
                "opposite ways: depends (normal)",
            ]
        ),
    ]
    for n in SEEDS:
        for k in SETS:
            for r in test_set:
                cells = [
                    " / ".join(f"{simulate(s, r, tie, n, k, d, rho):.2f}" for rho in RHOS)
                    for s, d in (("power", "normal"), ("power", "t3"), ("half", "normal"), ("half", "t3"))
                ]
                cells.append(" / ".join(f"{simulate('depends', r, tie, n, k, 'normal', rho):.2f}" for rho in RHOS))
                lines.append(table_row([n, k, f"`{r.name}`", *cells]))
    return lines
