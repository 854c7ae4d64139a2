"""The named decision rules (study/stats/rules.py): `seed_veto` is the rule the archived families were
declared under, exactly (its SE with v_sent and n - 1 df, the test against 0, the veto), `beyond_tie`
tests beyond the tie margin with the one variance model and never vetoes, `beyond_tie_exact` does the
same with Student's t at n - 1 df and both tails counted on an edge; a family file names its
rule, a file naming none is read with `seed_veto`, and an unknown rule is one line naming the file."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from settings.config import ConfigError
from study.read.family import load_family
from study.stats.rules import BEYOND_TIE, BEYOND_TIE_EXACT, CURRENT, RULES, SEED_VETO, UNNAMED
from study.stats.seed_test import SeedTest

D = np.array([0.9, 1.0, 0.8, 1.1, 0.95, 0.85, 1.05, -0.3])  # a clear lead with one seed the other way


def test_seed_veto_is_the_rule_of_e649a19():
    v_sent = 0.02
    se = math.sqrt(D.var(ddof=1) / len(D) + v_sent)
    want = 2 * stats.t.sf(abs(D.mean()) / se, len(D) - 1)
    assert float(SEED_VETO.decision_p(D, v_sent, 0.1)) == pytest.approx(want)
    test = SeedTest(len(D), 0.0, float(D.std(ddof=1)), v_sent, None, None, None, None)
    assert SEED_VETO.se(test) == pytest.approx(se)
    assert SEED_VETO.direction(D, 0.001, 0.1) == 0  # a seed beyond the tie margin the other way vetoes
    assert SEED_VETO.direction(D[:-1], 0.001, 0.1) == 1 and SEED_VETO.direction(-D[:-1], 0.001, 0.1) == -1


def test_beyond_tie_tests_beyond_the_margin_and_never_vetoes():
    v_shared = 0.002
    seed_part = D.var(ddof=1) / len(D)
    se = math.sqrt(seed_part + v_shared)
    df = se**4 * (len(D) - 1) / seed_part**2
    want = 2 * stats.t.sf((abs(D.mean()) - 0.1) / se, df)
    assert float(BEYOND_TIE.decision_p(D, v_shared, 0.1)) == pytest.approx(want)
    assert BEYOND_TIE.direction(D, 0.001, 0.1) == 1  # one seed the other way is descriptive, not a veto
    assert BEYOND_TIE.direction(D, 0.2, 0.1) == 0
    row = SeedTest(4, 0.0, 1.0, 0.5, None, None, None, None, v_shared=0.1)
    assert BEYOND_TIE.known(row) == 0.1 and SEED_VETO.known(row) == 0.5
    assert BEYOND_TIE.known(replace(row, v_shared=None)) == 0.5  # not split: bounded by the joint variance
    assert UNNAMED is SEED_VETO and set(RULES) == {"beyond_tie_exact", "beyond_tie", "seed_veto"}


def test_beyond_tie_exact_is_twice_the_two_sided_t_with_n_minus_1_df():
    """Student's t with n - 1 df, both tails within alpha/2 on an edge: the decision p is twice the
    two-sided p beyond the tie margin, the SE the same as beyond_tie's."""
    v_shared = 0.002
    se = math.sqrt(D.var(ddof=1) / len(D) + v_shared)
    want = 4 * stats.t.sf((abs(D.mean()) - 0.1) / se, len(D) - 1)
    assert CURRENT is BEYOND_TIE_EXACT
    assert float(BEYOND_TIE_EXACT.decision_p(D, v_shared, 0.1)) == pytest.approx(want)
    assert float(BEYOND_TIE_EXACT.decision_p(D[:2] * 0, v_shared, 0.1)) == 1.0  # capped at 1
    row = SeedTest(4, 0.0, 1.0, 0.5, None, None, None, None, v_shared=0.1, df=7.5)
    assert BEYOND_TIE_EXACT.known(row) == 0.1 and BEYOND_TIE_EXACT.df(row) == 3 and BEYOND_TIE.df(row) == 7.5
    assert BEYOND_TIE_EXACT.two_sided(0.05) == 0.025 and BEYOND_TIE.two_sided(0.05) == 0.05
    assert BEYOND_TIE_EXACT.direction(D, 0.001, 0.1) == 1 and BEYOND_TIE_EXACT.direction(D, 0.06, 0.1) == 0


def test_a_family_names_its_rule(tmp_path):
    path = tmp_path / "headline.yaml"
    path.write_text("headline:\n  - table: test\n    compared_on: test set\n", encoding="utf-8")
    assert load_family(str(path)).rule == "seed_veto"  # declared before rules had names
    path.write_text("rule: beyond_tie\nheadline:\n  - table: test\n", encoding="utf-8")
    assert load_family(str(path)).rule == "beyond_tie"
    path.write_text("rule: holm\nheadline:\n  - table: test\n", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"headline.yaml: rule 'holm' is not a decision rule; use beyond_tie_exact, beyond_tie or seed_veto",
    ):
        load_family(str(path))


def test_the_archived_families_keep_their_rule_and_the_trio_names_the_current_one():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    assert load_family(str(root / "configs/demo/findings/headline.yaml")).rule == "seed_veto"
    assert load_family(str(root / "configs/length/findings/headline.yaml")).rule == "seed_veto"
    assert load_family(str(root / "configs/report/trio/findings/headline.yaml")).rule == CURRENT.name
