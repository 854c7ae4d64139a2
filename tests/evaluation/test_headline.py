"""A study's result sentences (evaluation/headline.py), generated from its findings by fixed templates:
interim studies say so, the declared family's verdicts are counted, each declared row is one sentence
with its unadjusted and Holm p and what its seeds can detect; without a family, the test-set rows."""

from __future__ import annotations

from evaluation.headline import headline_markdown


def row(config: str, diff: float, seeds: int, **extra) -> dict:
    base = {
        "config": config,
        "compared_on": "test set",
        "mean_difference": diff,
        "per_seed": [diff] * seeds,
        "p_value": 0.004,
        "p_holm": 0.008,
        "detectable": 0.8,
        "finding": "behind",
    }
    return {**base, **extra}


def findings(rows: list[dict], family: str | None = "headline.yaml", interim=None) -> dict:
    return {
        "baseline": "sinusoidal",
        "tables": [{"name": "test", "metric": "BLEU", "alpha": 0.05, "rows": rows}],
        "family": family,
        "family_size": len(rows),
        "interim": interim,
    }


def test_a_declared_row_is_one_sentence_with_both_ps_and_what_its_seeds_see() -> None:
    text = headline_markdown(
        findings([row("learnable", -1.08, 20, declared=True, outcome="direction", equivalence_power=0.3)])
    )
    lines = text.splitlines()
    assert lines[0].startswith("- Declared headline family (`headline.yaml`): 1 comparisons against `sinusoidal`")
    assert "1 worded as a direction, 0 as equivalent" in lines[0]
    assert lines[1] == (
        "- `learnable` against `sinusoidal`, test set: mean difference -1.08 BLEU over 20 seeds, p 0.004 "
        "(unadjusted; Holm 0.008); detectable 0.80 BLEU at 80% power (two-sided α 0.05), equivalence power "
        "30% (out of reach) — behind."
    )


def test_an_interim_study_says_so_first() -> None:
    text = headline_markdown(findings([row("rope", 0.8, 3, declared=True)], interim={"seeds": 3, "planned": 12}))
    assert text.splitlines()[0] == (
        "- **Interim: 3 of 12 planned seeds.** No comparison of the declared family is worded as a direction "
        "or as equivalent until every planned seed is in."
    )


def test_without_a_family_every_row_is_descriptive_and_one_seed_is_said() -> None:
    text = headline_markdown(findings([row("rope", 3.03, 1, p_value=None, detectable=None)], family=None))
    assert text.splitlines() == [
        "- No declared headline family: every comparison against `sinusoidal` is descriptive.",
        "- `rope` against `sinusoidal`, test set: mean difference +3.03 BLEU over 1 seed — behind.",
        "- One seed per configuration: no test and no detectable effect; every row is that trained model.",
    ]
