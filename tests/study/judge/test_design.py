"""The study's design (study/judge/design.py): chosen once from the family or its findings; a sequential
design decides a declared row at its look (no Holm p), says where the plan stands, and words every
row it does not declare as the fixed design does."""

from __future__ import annotations

from dataclasses import replace

from study.judge.design import FIXED, SequentialDesign, design_for, design_of
from study.judge.report import findings_report
from study.judge.verdicts import apply_rule
from study.read.family import NO_FAMILY, Family
from study.records import FindingsTable, LookInterim, LookPlan, LookReading
from study.stats.rules import CURRENT
from tests.helpers import finding_row

ENTRY = {"table": "test", "compared_on": "test set", "configs": ["a"]}
SEQUENTIAL = Family(headline=[ENTRY], seeds=list(range(6)), looks=(4, 6), rule=CURRENT.name)
GOING_ON = LookPlan((4, 6), "obrien-fleming", "obrien-fleming", reached=1, taken=1, stopped=False, held=5)
DECIDED = LookReading(1, 2, 4, True, False, direction=1, boundary=0.003, repeated=(0.5, 4.5))


def test_the_design_is_chosen_once_from_the_family_or_its_findings() -> None:
    assert design_for(NO_FAMILY) is FIXED and design_for(SEQUENTIAL) == SequentialDesign()
    assert design_of(findings_report("b", NO_FAMILY, 0, (), 10, 1, [])) is FIXED
    sequential = SequentialDesign(GOING_ON).record(findings_report("b", SEQUENTIAL, 1, (), 10, 1, []))
    assert design_of(sequential).looks == GOING_ON


def test_a_sequential_design_decides_a_declared_row_at_its_look_and_words_the_rest_as_fixed() -> None:
    declared = replace(finding_row([3.0, 3.2, 2.9, 3.1]), look=DECIDED)
    other = finding_row([3.0, 3.2, 2.9, 3.1], config="c")
    tables = [FindingsTable("test", "test set", "sacreBLEU", (declared, other))]
    design = SequentialDesign(GOING_ON)
    (worded,), size = apply_rule(tables, SEQUENTIAL, design=design)
    at_look, rest = worded.rows
    assert size == 1 and at_look.p_holm is None and at_look.p_value is not None  # decided by look, not Holm
    assert at_look.finding.startswith("ahead by more than") and "decided at look 1 of 2, 4 seeds" in at_look.finding
    assert design.headline_p_cell(at_look) == "look 1 of 2 (4 seeds)"
    assert design.table_p_cell(at_look) == "at look 1 of 2 (4 seeds)"
    assert design.interval(at_look) == (0.5, 4.5) != FIXED.interval(at_look)  # the repeated interval
    # a row the family does not declare: as in the fixed design
    (fixed,), _ = apply_rule(tables, SEQUENTIAL.model_copy(update={"looks": None}))
    assert rest.finding == fixed.rows[1].finding and not rest.declared
    assert [f(rest) for f in (design.table_p_cell, design.p_words)] == ["not declared"] * 2
    assert design.interim((worded,), SEQUENTIAL) == LookInterim(5, 6, 2)  # the next look's seeds
    assert replace(design, looks=replace(GOING_ON, stopped=True)).interim((worded,), SEQUENTIAL) is None
