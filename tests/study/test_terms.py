"""study/terms.py: the measures, findings tables and outcomes, each spelled once, written as their text."""

from __future__ import annotations

import json

from study.read.family import TABLES, UNITS, Family
from study.terms import Measure, Outcome, Table
from utils.markdown import table_row
from utils.metrics import HEADLINE


def test_a_measure_is_its_metric_and_unit() -> None:
    bleu, nll = Measure.SACREBLEU, Measure.NLL
    assert bleu.metric.name == HEADLINE and bleu.value == bleu.metric.label == "sacreBLEU"
    assert (bleu.digits, bleu.unit, bleu.lower_is_better) == (2, "BLEU", False)
    assert (nll.digits, nll.unit, nll.lower_is_better) == (3, "nats", True)
    assert Measure("NLL") is nll  # a findings JSON's `metric` read back


def test_the_family_keys_its_numbers_and_names_its_tables_by_these_values() -> None:
    assert UNITS == tuple(Measure)  # tie_margin, effect, equivalence: one number per measure
    assert TABLES == tuple(Table)
    family = Family(headline=[{"table": "concat"}])
    assert family.headline[0].table == Table.CONCAT
    assert family.tie_margin.of(Measure.NLL) == 0.01


def test_each_table_compares_in_one_measure() -> None:
    nll = {t for t in Table if t.measure is Measure.NLL}
    assert nll == {Table.DEGRADATION, Table.TEACHER_FORCED}


def test_a_member_is_written_as_its_text() -> None:
    """The records hold members; the JSON and the pages stay byte for byte what the text gave."""
    row = {"metric": Measure.NLL, "name": Table.TEACHER_FORCED, "outcome": Outcome.NOT_TESTED}
    assert json.dumps(row, indent=2) == json.dumps({k: v.value for k, v in row.items()}, indent=2)
    assert f"{Measure.SACREBLEU} {Outcome.BOTH}" == "sacreBLEU both"
    assert table_row([Outcome.WITHHELD]) == "| withheld |"


def test_the_worded_outcomes_are_the_verdicts() -> None:
    worded = [o for o in Outcome if o.worded]
    assert worded == [Outcome.DIRECTION, Outcome.DEPENDS, Outcome.EQUIVALENT, Outcome.BOTH, Outcome.INCONCLUSIVE]
