"""A declared family decided look by look (study/stats/sequential_family.py): Holm as a graph, alpha passed
on only by a rejected null, the study stopping when every comparison is decided, and the family-wise
error rate over looks and comparisons (simulated)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from study.stats.sequential_family import Decision, Graph, LookTests, Plan, decide, nominal_level, repeated_interval


def look_tests(decision_p, equivalence_p=None, sign=None) -> LookTests:
    m = len(decision_p)
    return LookTests(tuple(decision_p), tuple(equivalence_p or (1.0,) * m), tuple(sign or (1,) * m))


def said(decisions) -> list[tuple]:
    """Each decision's look, seeds, direction and equivalence."""
    return [(d.look, d.seeds, d.direction, d.equivalent) for d in decisions]


def test_holm_is_a_graph_whose_rejections_pass_their_weight_on() -> None:
    graph = Graph.holm(3)
    assert graph.weights == pytest.approx((1 / 3,) * 3)
    after = graph.without(0)
    assert after.weights == pytest.approx((0.0, 0.5, 0.5))
    assert after.transitions[1][2] == pytest.approx(1.0) and after.transitions[2][1] == pytest.approx(1.0)
    assert after.without(1).weights == pytest.approx((0.0, 0.0, 1.0))
    assert graph.closed(0).weights == pytest.approx((0.0, 1 / 3, 1 / 3))  # closed unrejected: nothing passed on


def test_one_look_is_holms_procedure() -> None:
    """p = 0.01, 0.04, 0.03 at alpha 0.05: 0.01 < 0.05/3 is rejected, then 0.03 > 0.05/2 stops."""
    decisions, taken = decide(Plan(looks=(10,)), [look_tests((0.01, 0.04, 0.03))])
    assert taken == 1 and [d.direction for d in decisions] == [1, 0, 0]
    decisions, _ = decide(Plan(looks=(10,)), [look_tests((0.01, 0.04, 0.02))])
    assert [d.direction for d in decisions] == [1, 1, 1]  # 0.02 < 0.025, then 0.04 < 0.05
    assert decisions[0] == Decision(0, 10, 1, False, pytest.approx(0.05 / 3), pytest.approx(0.05 / 3))
    # the level each passed: Holm's steps, α/3, α/2, then the whole α
    assert [d.boundary for d in decisions] == pytest.approx([0.05 / 3, 0.05, 0.05 / 2])


def test_equivalence_does_not_pass_on_the_difference_familys_share() -> None:
    """Comparison 0 is found equivalent (its difference null stands): comparison 1's difference test
    keeps its half of alpha (0.04 > 0.025); had comparison 0 been a direction, 1 would get all of it."""
    plan = Plan(looks=(10,))
    equivalent_first, _ = decide(plan, [look_tests((0.5, 0.04), equivalence_p=(0.001, 0.9))])
    assert equivalent_first[0].equivalent and equivalent_first[0].direction == 0
    assert equivalent_first[1].look is None  # undecided: 0.04 needs the whole 0.05
    direction_first, _ = decide(plan, [look_tests((0.001, 0.04))])
    assert [d.direction for d in direction_first] == [1, 1]


def test_the_study_stops_when_every_comparison_is_decided() -> None:
    plan = Plan(looks=(8, 12, 16, 20), spending="pocock", spending_equivalence="pocock")
    early = [look_tests((1e-6, 0.9), (0.9, 1e-6)), look_tests((0.9, 0.9)), look_tests((1e-9, 1e-9))]
    decisions, taken = decide(plan, early)
    assert taken == 1 and said(decisions) == [(0, 8, 1, False), (0, 8, 0, True)]
    late = [look_tests((0.5, 0.5)), look_tests((0.5, 1e-6), sign=(1, -1)), look_tests((1e-7, 0.5))]
    decisions, taken = decide(plan, late)
    assert taken == 3 and said(decisions) == [(2, 16, 1, False), (1, 12, -1, False)]
    decisions, taken = decide(plan, [look_tests((0.5, 0.5))] * 4)
    assert taken == 4 and all(d.look is None for d in decisions)


def test_a_raised_level_lowers_the_boundary_at_later_looks() -> None:
    plan = Plan(looks=(8, 12, 16, 20))
    assert nominal_level(plan.fractions, 0.05, "obrien-fleming", 2) > nominal_level(
        plan.fractions, 0.025, "obrien-fleming", 2
    )
    assert nominal_level(plan.fractions, 0.0, "obrien-fleming", 2) == 0.0


@pytest.mark.parametrize(("spending", "at_most"), [("obrien-fleming", 0.05), ("pocock", 0.05)])
def test_the_family_wise_error_rate_holds_over_looks_and_comparisons(spending: str, at_most: float) -> None:
    """Three comparisons under the global null, z statistics over four looks (a Brownian score each):
    a direction is worded for some comparison in at most alpha of families (+ 2 Monte Carlo SE);
    testing each look at the full Holm level without spending exceeds it."""
    plan = Plan(looks=(8, 12, 16, 20), spending=spending, spending_equivalence=spending)
    rng = np.random.default_rng(11)
    families, m = 1500, 3
    steps = np.diff((0.0, *plan.fractions))
    z = np.cumsum(rng.standard_normal((families, m, 4)) * np.sqrt(steps), axis=2) / np.sqrt(plan.fractions)
    p = 2 * stats.norm.sf(np.abs(z))
    wrong = spent_free = 0
    for f in range(families):
        looks = [look_tests(tuple(p[f, :, k])) for k in range(4)]
        decisions, _ = decide(plan, looks)
        wrong += any(d.direction != 0 for d in decisions)
        spent_free += any(decide(Plan(looks=(20,)), [looks[k]])[0][i].direction for k in range(4) for i in range(m))
    mc = 2 * np.sqrt(at_most * (1 - at_most) / families)
    assert wrong / families <= at_most + mc
    assert spent_free / families > at_most + mc  # the mutation: every look at the full level


def test_a_repeated_interval_is_wider_than_the_plain_one() -> None:
    plain = repeated_interval(0.8, 0.2, 19, 0.05)
    early = repeated_interval(0.8, 0.2, 19, 0.003)
    assert early[0] < plain[0] < 0.8 < plain[1] < early[1]
    assert plain[1] - 0.8 == pytest.approx(stats.t.isf(0.025, 19) * 0.2)
