"""The findings as markdown (study/pages/findings_markdown.py): the declared comparisons in full first,
then one table per measure, a row per comparison with its per-seed differences, both ps (against no
difference; Holm by the family's rule for declared rows), the equivalence test and the detectable
effect, the exploratory finding where the family's rule is older; interim studies say so first."""

from __future__ import annotations

from study.pages.findings_markdown import detectable_cell, equivalence_cell, findings_markdown
from study.records import (
    ComparisonRow,
    Findings,
    FindingsTable,
    Interim,
    JudgedRow,
    Reading,
    RowPower,
    RowTest,
    RuleText,
    SeedDifference,
    frozen_map,
)
from study.stats.seed_test import SeedTest
from study.terms import RowKey, WholeTestSet


def row(config: str = "rope", declared: bool = True, detectable=0.66, exploratory=None, **given) -> JudgedRow:
    """A worded row; `given`: p_equivalence, p_equivalence_holm, equivalence_power, seeds_for_equivalence."""
    p_eq, p_eq_holm, power_eq, seeds_eq = (
        given.get(k) for k in ("p_equivalence", "p_equivalence_holm", "equivalence_power", "seeds_for_equivalence")
    )
    reading = Reading("beyond_tie", None, 0.0008, p_eq, p_eq_holm, outcome="inconclusive", finding="inconclusive")
    power = RowPower(detectable, 14, power_eq, seeds_eq) if detectable is not None else None
    return JudgedRow(
        key=RowKey("test", config, WholeTestSet()),
        seeds=(1, 2),
        num_sentences=2000,
        per_seed=(SeedDifference(1, 1.0, 0.01), SeedDifference(2, 0.64, 0.2)),
        tested=RowTest(0.82, SeedTest(2, 0.82, 0.25, 0.01, 0.2, 0.0004, None, None)),
        declared=declared,
        reading=reading,
        exploratory=exploratory,
        power=power,
    )


CURRENT_RULE = RuleText("beyond_tie", "the rule")


def findings(rows: list[ComparisonRow], interim=None, rule=CURRENT_RULE, exploratory=None):
    return Findings(
        baseline="sinusoidal",
        metric="sacreBLEU",
        alpha=0.05,
        test="seed-level t-test",
        correction="holm",
        family="headline.yaml",
        decision_rule=rule,
        exploratory_rule=exploratory,
        family_size=2,
        family_unmatched=(),
        tie_margin=frozen_map({"sacreBLEU": 0.1}),
        equivalence_margin=frozen_map({"sacreBLEU": 1.0}),
        equivalence_test="TOST",
        planned_seeds=None,
        planned_device=None,
        planned_precision=None,
        interim=interim,
        descriptive_p="sacreBLEU's paired bootstrap",
        n_samples=10000,
        bootstrap_seed=12345,
        rule="One rule.",
        tables=(FindingsTable("test", "test set", "sacreBLEU", tuple(rows), alpha=0.05),),
    )


def test_a_declared_row_with_both_ps_equivalence_and_the_detectable_effect() -> None:
    r = row(p_equivalence=0.2, p_equivalence_holm=0.4, equivalence_power=0.35, seeds_for_equivalence=None)
    text = findings_markdown(findings([r, row(config="learnable", declared=False)]))
    lines = text.splitlines()
    assert lines[0] == "Declared comparisons, in full:"
    assert lines[2].startswith("- `rope` against `sinusoidal`, test set: mean difference +0.82 BLEU over 2 seeds")
    assert lines[4] == "Against `sinusoidal`, test set:"
    assert "| p, Holm (declared, rule `beyond_tie`) | equivalent within ±1.00 BLEU (declared) |" in lines[6]
    assert lines[8] == (
        "| rope | test set (n=2000) | +0.82 | 1: +1.00, 2: +0.64 | <0.001 | <0.001 | Holm p 0.40; power 35% if the "
        "true difference were 0; out of reach at any seed count | 0.66 (14 seeds for the declared effect) | "
        "1: 0.01, 2: 0.20 | inconclusive |"
    )
    assert "| learnable | test set (n=2000) |" in lines[9] and "| not declared | – |" in lines[9]
    assert "Decision rule `beyond_tie` (the family's): the rule." in text
    assert "Holm's correction runs over the headline family declared in `headline.yaml` (2 comparisons)" in text


def test_cells_without_a_test_are_dashes_and_an_interim_study_says_so() -> None:
    assert equivalence_cell(row(), "sacreBLEU") == "–" and detectable_cell(row(detectable=None), "sacreBLEU") == "–"
    text = findings_markdown(findings([row()], interim=Interim(5, 12)))
    assert text.startswith("**Interim: 5 of 12 planned seeds** of the declared family (`headline.yaml`)")


def test_an_older_rule_adds_the_exploratory_finding_column() -> None:
    r = row(exploratory=Reading("beyond_tie", outcome="direction", finding="ahead by more than 0.10 BLEU"))
    current = RuleText("beyond_tie", "the current rule")
    text = findings_markdown(findings([r], rule=RuleText("seed_veto", "the older rule"), exploratory=current))
    assert "| finding | exploratory finding (rule `beyond_tie`) |" in text
    assert "| inconclusive | ahead by more than 0.10 BLEU |" in text
    assert "Exploratory finding: rule `beyond_tie` (the current rule), read after these runs" in text


def test_the_level_is_printed_to_the_digits_that_tell_it_apart() -> None:
    """Issue 77: α 0.0125 (Holm's first step over four comparisons) was printed "0.013"."""
    from dataclasses import replace

    report = findings([row()])
    table = replace(report.tables[0], alpha=0.0125)
    assert "at two-sided α = 0.0125." in findings_markdown(replace(report, tables=(table,)))
