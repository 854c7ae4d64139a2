"""The across-set reading of one comparison (study/stats/across_sets.py): a direction across only where
every set's mean goes that way, at the largest of the sets' decision p's (intersection–union); "equivalent
across" at the largest TOST p; "depends on the test set" where the signs differ, at the larger of each
side's smallest p; else inconclusive. Its calibration: tests/study/simulate/test_across_calibration.py."""

from __future__ import annotations

import numpy as np
import pytest

from study.stats.across_sets import (
    DEPENDS,
    Across,
    AcrossTest,
    SetRow,
    across_arrays,
    across_test,
    depends_factor,
    words,
)


def test_every_set_the_same_way_takes_the_largest_p():
    test = across_test([SetRow(1.2, 0.001, 0.6), SetRow(0.4, 0.03, 0.4), SetRow(0.9, 0.01, 0.7)])
    assert test == AcrossTest(Across.AHEAD, 0.03, 0.7, 1.0)
    assert test.readings() == (Across.AHEAD,)
    assert test.readings(level=0.02) == (Across.INCONCLUSIVE,)  # one set short of the level: no direction
    behind = across_test([SetRow(-1.2, 0.001, 0.6), SetRow(-0.4, 0.03, 0.4)])
    assert behind.candidate is Across.BEHIND and behind.p == 0.03 and behind.readings() == (Across.BEHIND,)


def test_the_adjusted_p_decides_where_given():
    """The caller's Holm-adjusted (or a look's) p replaces the test's own; the decision is p < level."""
    test = across_test([SetRow(1.0, 0.01, 0.5), SetRow(0.5, 0.02, 0.5)])
    assert test.readings(p=0.06) == (Across.INCONCLUSIVE,)
    assert test.readings(level=0.02) == (Across.INCONCLUSIVE,) and test.readings(level=0.0201) == (Across.AHEAD,)


def test_signs_that_differ_depend_on_the_test_set():
    test = across_test([SetRow(1.1, 0.001, 0.5), SetRow(-0.6, 0.04, 0.5), SetRow(0.3, 0.3, 0.5)])
    # the smaller p on the positive side (0.001), the only one on the negative (0.04): the larger of the two
    assert test == AcrossTest(Across.DEPENDS, 1.0, 0.5, 0.04)
    assert test.readings() == (Across.DEPENDS,)
    assert test.readings(depends_p=0.2) == (Across.INCONCLUSIVE,)
    # a direction across is never worded where the signs differ, however small the sets' p's
    assert across_test([SetRow(1.0, 1e-9, 0.5), SetRow(-1.0, 1e-9, 0.5)]).readings() == (Across.DEPENDS,)


def test_equivalence_across_takes_the_largest_tost_p():
    test = across_test([SetRow(0.05, 0.9, 0.01), SetRow(-0.02, 0.9, 0.03)])
    assert test.equivalence_p == 0.03 and test.readings() == (Across.EQUIVALENT,)
    assert test.readings(equivalence_p=0.07) == (Across.INCONCLUSIVE,)
    both = across_test([SetRow(0.5, 0.001, 0.01), SetRow(0.4, 0.002, 0.02)])
    assert both.readings() == (Across.AHEAD, Across.EQUIVALENT)  # a small real difference inside the margin


def test_inconclusive_otherwise():
    assert across_test([SetRow(0.3, 0.2, 0.3), SetRow(0.4, 0.01, 0.2)]).readings() == (Across.INCONCLUSIVE,)
    zero = across_test([SetRow(0.0, 0.001, 0.3), SetRow(0.4, 0.001, 0.2)])  # a mean of exactly 0 goes neither way
    assert zero.candidate is Across.INCONCLUSIVE and zero.readings() == (Across.INCONCLUSIVE,)
    missing = across_test([SetRow(0.5, float("nan"), 0.3), SetRow(0.4, 0.001, 0.2)])  # a p not computed
    assert missing.readings() == (Across.INCONCLUSIVE,)
    with pytest.raises(ValueError, match="two or more sets"):
        across_test([SetRow(0.5, 0.001, 0.3)])


def test_depends_needs_no_correction_up_to_three_sets_and_bonferroni_beyond():
    assert [depends_factor(k) for k in (2, 3, 4, 5)] == [1.0, 1.0, 1.5, 2.0]
    four = across_test([SetRow(1.0, 0.001, 1), SetRow(-1.0, 0.02, 1), SetRow(-1.0, 0.5, 1), SetRow(1.0, 0.5, 1)])
    assert four.depends_p == pytest.approx(0.03)


def test_the_vectorised_form_is_the_scalar_one():
    rng = np.random.default_rng(0)
    means, p, eq = rng.normal(0, 1, (200, 3)), rng.uniform(0, 0.1, (200, 3)), rng.uniform(0, 0.1, (200, 3))
    direction, p_across, _, depends_p = across_arrays(means, p, eq)
    said = words(direction, p_across, depends_p)
    code = {Across.AHEAD: 1, Across.BEHIND: -1, Across.DEPENDS: DEPENDS, Across.EQUIVALENT: 0, Across.INCONCLUSIVE: 0}
    for i in range(200):
        reading = across_test([SetRow(*x) for x in zip(means[i], p[i], eq[i])]).readings()
        assert said[i] == code[reading[0]]
