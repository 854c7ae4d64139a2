"""Group-sequential boundaries (study/stats/sequential.py): gsDesign's published values, the error rate
each spends (checked by simulating the score process), and what a look's t-test needs."""

from __future__ import annotations

import numpy as np
import pytest

from study.stats.sequential import SPENDING, boundaries, obrien_fleming, pocock, t_boundary

FOUR_LOOKS = (0.25, 0.5, 0.75, 1.0)


def test_obrien_fleming_type_boundaries_match_gsdesign() -> None:
    """gsDesign(k = 4, test.type = 2, alpha = 0.025, sfu = sfLDOF): 4.333, 2.963, 2.359, 2.014."""
    found = boundaries(FOUR_LOOKS, alpha=0.05, spending="obrien-fleming")
    assert [round(c, 3) for c in found.z] == [4.333, 2.963, 2.359, 2.014]


@pytest.mark.parametrize("spending", sorted(SPENDING))
@pytest.mark.parametrize("fractions", [FOUR_LOOKS, (0.4, 0.6, 0.8, 1.0), (0.5, 1.0)])
def test_the_boundaries_spend_what_the_function_says(spending: str, fractions: tuple) -> None:
    """Simulated Brownian score paths cross at look k with probability f(t_k) - f(t_{k-1}) per side:
    0.05 in all, however the looks are spaced (the mutation of deciding each look at the full alpha,
    |Z| >= 1.96, fails)."""
    found = boundaries(fractions, alpha=0.05, spending=spending)
    rng = np.random.default_rng(7)
    steps = np.diff((0.0, *fractions))
    score = np.cumsum(rng.standard_normal((200_000, len(fractions))) * np.sqrt(steps), axis=1)
    z = score / np.sqrt(fractions)

    def first_crossings(bounds) -> np.ndarray:
        crossed = np.abs(z) >= np.asarray(bounds)
        first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
        return np.array([(first == k).mean() for k in range(len(fractions))])

    spend = SPENDING[spending]
    wanted = np.diff([0.0, *(2 * spend(t, 0.025) for t in fractions)])
    assert first_crossings(found.z) == pytest.approx(wanted, abs=0.0015)
    assert first_crossings(found.z).sum() == pytest.approx(0.05, abs=0.002)
    assert first_crossings([1.96] * len(fractions)).sum() > 0.07  # no spending: the error rate inflates


def test_the_spending_functions_spend_all_of_alpha_by_the_end() -> None:
    for spend in (obrien_fleming, pocock):
        assert spend(0.0, 0.025) == 0.0 and spend(1.0, 0.025) == pytest.approx(0.025)
        assert spend(0.3, 0.025) < spend(0.6, 0.025) < 0.025
    assert obrien_fleming(0.25, 0.025) < pocock(0.25, 0.025)  # O'Brien-Fleming keeps its alpha for the end


def test_one_look_is_the_fixed_design() -> None:
    assert boundaries((1.0,), alpha=0.05).z[0] == pytest.approx(1.959964, abs=1e-6)
    assert boundaries((1.0,), alpha=0.05).nominal[0] == pytest.approx(0.05)


def test_an_early_look_with_few_degrees_of_freedom_needs_a_large_t() -> None:
    """O'Brien-Fleming's first of four looks at 5 seeds (4 df) needs |t| > 25: it cannot stop."""
    first = boundaries(FOUR_LOOKS, spending="obrien-fleming").nominal[0]
    assert t_boundary(first, 4) > 25
    assert t_boundary(boundaries(FOUR_LOOKS, spending="pocock").nominal[0], 7) < 3.5  # Pocock at 8 seeds can


@pytest.mark.parametrize(
    ("fractions", "spending"), [((0.5, 0.9), "pocock"), ((0.6, 0.4, 1.0), "pocock"), (FOUR_LOOKS, "haybittle")]
)
def test_a_plan_that_is_not_one_is_refused(fractions: tuple, spending: str) -> None:
    with pytest.raises(ValueError):
        boundaries(fractions, spending=spending)
