"""The findings as markdown (study/findings_markdown.py): the declared comparisons in full first,
then one table per measure, a row per comparison with its per-seed differences, both ps (against no
difference; Holm by the family's rule for declared rows), the equivalence test and the detectable
effect, the exploratory finding where the family's rule is older; interim studies say so first."""

from __future__ import annotations

from study.findings_markdown import detectable_cell, equivalence_cell, findings_markdown


def row(**extra) -> dict:
    base = {
        "config": "rope",
        "compared_on": "test set",
        "num_sentences": 2000,
        "mean_difference": 0.82,
        "per_seed": [{"seed": 1, "difference": 1.0, "p_value": 0.01}, {"seed": 2, "difference": 0.64, "p_value": 0.2}],
        "p_value": 0.0004,
        "p_holm": 0.0008,
        "declared": True,
        "detectable": 0.66,
        "seeds_needed": 14,
        "finding": "inconclusive",
    }
    return {**base, **extra}


def findings(rows: list[dict], interim=None) -> dict:
    return {
        "baseline": "sinusoidal",
        "tables": [{"title": "test set", "metric": "sacreBLEU", "alpha": 0.05, "rows": rows}],
        "equivalence_margin": {"sacreBLEU": 1.0},
        "family": "headline.yaml",
        "family_size": 2,
        "tie_margin": {"sacreBLEU": 0.1},
        "equivalence_test": "TOST",
        "test": "seed-level t-test",
        "n_samples": 10000,
        "bootstrap_seed": 12345,
        "descriptive_p": "sacreBLEU's paired bootstrap",
        "rule": "One rule.",
        "decision_rule": {"name": "beyond_tie", "text": "the rule"},
        "interim": interim,
    }


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
    text = findings_markdown(findings([row()], interim={"seeds": 5, "planned": 12}))
    assert text.startswith("**Interim: 5 of 12 planned seeds** of the declared family (`headline.yaml`)")


def test_an_older_rule_adds_the_exploratory_finding_column() -> None:
    r = row(exploratory={"rule": "beyond_tie", "finding": "ahead by more than 0.10 BLEU"})
    older = {**findings([r]), "decision_rule": {"name": "seed_veto", "text": "the older rule"}}
    older["exploratory_rule"] = {"name": "beyond_tie", "text": "the current rule"}
    text = findings_markdown(older)
    assert "| finding | exploratory finding (rule `beyond_tie`) |" in text
    assert "| inconclusive | ahead by more than 0.10 BLEU |" in text
    assert "Exploratory finding: rule `beyond_tie` (the current rule), read after these runs" in text
