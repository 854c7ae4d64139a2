"""What the generated text may not claim (tools/page_claims.py, issue 77): an exploratory reading never
says "declared", and a row decided at a sequential plan's looks prints no fixed-design figure; on the
committed findings of every study, and on findings made here through the judge and the pages, so that a
change of the wording that breaks either fails here."""

from __future__ import annotations

import json
from dataclasses import replace

from study.judge.design import SequentialDesign
from study.judge.report import findings_report
from study.judge.verdicts import word_tables
from study.pages.findings_markdown import findings_markdown
from study.pages.headline import headline_markdown
from study.pages.serialize import findings_json
from study.read.family import NO_FAMILY, Family
from study.records import FindingsTable, LookPlan, LookReading
from study.stats.rules import CURRENT
from tests.helpers import ROOT, finding_row
from tools.page_claims import claim_failures, exploratory_declared, sequential_fixed_figures

PREFIXES = [p.relative_to(ROOT).as_posix()[: -len("_findings.json")] for p in ROOT.glob("results/**/*_findings.json")]
AHEAD = [0.9, 1.0, 0.8, 1.1, 0.95, 0.85, 1.05, -0.3]  # a clear lead, one seed the other way: the veto stops it


def test_no_committed_findings_make_either_claim() -> None:
    assert PREFIXES and claim_failures(ROOT, PREFIXES) == []


def test_the_findings_name_the_tests_sidedness() -> None:
    assert "two-sided: p = 2 P(t_df > |T|)" in findings_report("b", NO_FAMILY, 0, (), 10, 1, []).test
    for prefix in PREFIXES:
        test = json.loads((ROOT / f"{prefix}_findings.json").read_text(encoding="utf-8"))["test"]
        assert "two-sided: p = 2 P(t_df > |T|)" in test, prefix


def test_an_exploratory_reading_never_says_declared() -> None:
    family = Family(headline=[{"table": "test", "compared_on": "test set"}], equivalence={"sacreBLEU": 1.0})
    tables, size, missing, plan = word_tables(
        [FindingsTable("test", "test set", "sacreBLEU", (finding_row(AHEAD),))], family.at("h.yaml")
    )
    findings = findings_report("sinusoidal", family.at("h.yaml"), size, missing, 100, 1, tables, plan)
    (row,) = findings.tables[0].rows
    assert row.exploratory.outcome == "direction"  # the current rule words what the veto stopped
    record = json.loads(findings_json(findings))
    texts = {"findings": findings_markdown(findings), "headline": headline_markdown(findings)}
    assert [f for name, text in texts.items() for f in exploratory_declared(name, text)] == []
    assert "declared" not in record["tables"][0]["rows"][0]["exploratory"]["finding"]
    # the check sees one: the sentence, a table's exploratory column
    sentence = "- `a` against `b`, test set: x — y. Exploratory (rule `beyond_tie`): ahead (Holm p 0.01, declared)."
    assert exploratory_declared("f.md", sentence)
    table = "\n".join(
        [
            "| config | compared on | finding | exploratory finding (rule `x`) |",
            "|---|---|---|---|",
            "| a | t | y | ahead (declared) |",
        ]
    )
    assert exploratory_declared("f.md", table) and not exploratory_declared("f.md", table.replace(" (declared)", ""))


def test_a_sequential_row_prints_no_fixed_design_figure() -> None:
    family = Family(
        headline=[{"table": "test", "compared_on": "test set", "configs": ["a"]}],
        seeds=list(range(8)),
        looks=(4, 8),
        rule=CURRENT.name,
        equivalence={"sacreBLEU": 1.0},
    ).at("h.yaml")
    plan = LookPlan((4, 8), "obrien-fleming", "obrien-fleming", reached=1, taken=1, stopped=True, held=0)
    look = LookReading(
        1, 2, 4, True, False, direction=1, boundary=0.003, boundary_equivalence=0.001, repeated=(0.5, 4.5)
    )
    decided = replace(finding_row([3.0, 3.2, 2.9, 3.1]), look=look)
    design = SequentialDesign(plan)
    tables, size, missing, interim = word_tables(
        [FindingsTable("test", "test set", "sacreBLEU", (decided, finding_row([3.0, 3.2, 2.9, 3.1], config="c")))],
        family,
        design=design,
    )
    findings = design.record(findings_report("sinusoidal", family, size, missing, 100, 1, tables, interim))
    text, record = findings_markdown(findings), json.loads(findings_json(findings))
    assert record["tables"][0]["rows"][0]["look"] and sequential_fixed_figures("f.md", record, text) == []
    line = next(line for line in text.splitlines() if line.startswith("| a | test set"))
    assert "| – (sequential) |" in line and "against its boundary 0.001 at look 1" in line
    other = next(line for line in text.splitlines() if line.startswith("| c | test set"))
    assert "seeds for the declared effect" in other  # a row the family does not declare: a fixed design's row
    # the check sees one: a fixed design's sentence for the same row
    fixed = text.replace("decided look by look against its boundary, below)", "x); detectable 1.07 BLEU at 80% power")
    assert sequential_fixed_figures("f.md", record, fixed)
