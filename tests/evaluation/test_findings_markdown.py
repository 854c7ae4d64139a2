"""The findings as markdown (evaluation/findings_markdown.py): one table per measure, a row per
comparison with its per-seed differences, both ps (unadjusted; Holm for declared rows), the
equivalence test and the detectable effect; interim studies say so first."""

from __future__ import annotations

from evaluation.findings_markdown import detectable_cell, equivalence_cell, findings_markdown


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
        "interim": interim,
    }


def test_a_declared_row_with_both_ps_equivalence_and_the_detectable_effect() -> None:
    r = row(p_equivalence=0.2, p_equivalence_holm=0.4, equivalence_power=0.35, seeds_for_equivalence=None)
    text = findings_markdown(findings([r, row(config="learnable", declared=False)]))
    lines = text.splitlines()
    assert lines[0] == "Against `sinusoidal`, test set:"
    assert "| equivalent within ±1.00 BLEU (declared) |" in lines[2]
    assert lines[4] == (
        "| rope | test set (n=2000) | +0.82 | 1: +1.00, 2: +0.64 | <0.001 | <0.001 | Holm p 0.40; power 35%; out of "
        "reach at any seed count | 0.66 (14 seeds for the declared effect) | 1: 0.01, 2: 0.20 | inconclusive |"
    )
    assert "| learnable | test set (n=2000) |" in lines[5] and "| not declared | – |" in lines[5]
    assert "Holm's correction runs over the headline family declared in `headline.yaml` (2 comparisons)" in text


def test_cells_without_a_test_are_dashes_and_an_interim_study_says_so() -> None:
    assert equivalence_cell(row(), "sacreBLEU") == "–" and detectable_cell(row(detectable=None), "sacreBLEU") == "–"
    text = findings_markdown(findings([row()], interim={"seeds": 5, "planned": 12}))
    assert text.startswith("**Interim: 5 of 12 planned seeds** of the declared family (`headline.yaml`)")
