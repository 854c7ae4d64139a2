"""A study's results at a glance and in full (study/pages/headline.py), generated from its findings:
one table row per declared comparison with its interval, the seeds that way, the Holm p and the
declared verdict, the current rule's exploratory reading beside a family declared under an older
rule; the family line counts the verdicts and says 'without a verdict' only when some are; interim
studies say so first; without a family, the test-set rows; the full sentences label the power to
show ±m if the true difference were 0."""

from __future__ import annotations

from study.judge.report import findings_report
from study.judge.verdicts import word_tables
from study.pages.headline import headline_markdown, sentences_markdown
from study.read.family import NO_FAMILY, Family
from study.records import Findings, FindingsTable
from study.stats.rules import CURRENT
from tests.helpers import finding_row


def report(rows: list, rule: str = "seed_veto", path: str | None = "headline.yaml", seeds=None) -> Findings:
    if path is None:  # no family declared
        family = NO_FAMILY.model_copy(update={"rule": rule, "seeds": seeds})
    else:
        family = Family(
            headline=[{"table": "test", "compared_on": "test set"}],
            equivalence={"sacreBLEU": 1.0},
            rule=rule,
            seeds=seeds,
        ).at(path)
    tables = [FindingsTable("test", "test set", "sacreBLEU", tuple(rows))]
    tables, size, missing, plan = word_tables(tables, family)
    return findings_report("sinusoidal", family, size, missing, 1000, 1, tables, plan)


VETOED = [0.9, 1.0, 0.8, 1.1, 0.95, 0.85, 1.05, -0.3]  # a clear lead with one seed the other way


def test_the_table_shows_the_declared_verdict_and_the_exploratory_reading_where_it_differs():
    findings = report(
        [finding_row(VETOED, config="rope"), finding_row([2.0, 2.2, 1.9, 2.1, 2.05, 1.95, 2.0, 2.1], config="alibi")]
    )
    lines = headline_markdown(findings).splitlines()
    assert lines[0] == (
        "Declared family `headline.yaml`: 2 comparisons against `sinusoidal`, decided by rule `seed_veto` with "
        "Holm's correction over the family: 1 direction, 0 equivalent, 0 both, 1 inconclusive."
    )  # every row counted: no "without a verdict"
    assert lines[2].startswith(
        "| comparison | measure | Δ [95% interval] | seeds that way | Holm p of the direction test "
        "| verdict (declared) |"
    )
    rope, alibi = lines[4], lines[5]
    assert rope.startswith("| `rope` | test set (BLEU) | +0.79 [") and "| 7 of 8 above +0.10 |" in rope
    # the veto's reason in the row itself, beside the column's Holm p that passed
    assert "| inconclusive (vetoed: a seed lies beyond the tie margin the other way; equivalence Holm p" in rope
    assert "| ahead by more than 0.10 BLEU (Holm p" in rope
    assert alibi.endswith("| ahead in every seed | same verdict |")
    text = "\n".join(lines)
    assert "rule `seed_veto`, the rule the family was declared under" in text
    assert f"Exploratory: rule `{CURRENT.name}`" in text and "√(s_d²/n + v_shared)" in text


def test_a_family_under_the_current_rule_has_no_exploratory_column():
    findings = report([finding_row(VETOED, config="rope")], rule=CURRENT.name)
    text = headline_markdown(findings)
    assert "exploratory" not in text.lower()
    assert "| ahead by more than 0.10 BLEU |" in text  # no veto: one seed the other way does not stop it


def test_an_interim_study_says_so_first_and_counts_the_withheld():
    findings = report([finding_row(VETOED, config="rope")], seeds=list(range(12)))
    lines = headline_markdown(findings).splitlines()
    assert lines[0] == (
        "**Interim: 8 of 12 planned seeds.** No comparison of the declared family is worded as a direction or "
        "as equivalent until every planned seed is in."
    )
    assert lines[2].endswith("0 inconclusive, 1 without a verdict (interim or not from the declaring commit).")
    assert "| interim (8 of 12 planned seeds) |" in lines[6]


def test_without_a_family_every_row_is_descriptive_and_one_seed_is_said():
    findings = report([finding_row([3.03], config="rope")], path=None)
    lines = headline_markdown(findings).splitlines()
    assert lines[0] == "No declared family: every comparison against `sinusoidal` is descriptive."
    assert lines[4] == "| `rope` | test set (BLEU) | +3.03 | 1 of 1 above +0.10 | not declared | descriptive |"
    assert "One seed per configuration: no test and no interval; every row is that trained model." in lines


def test_a_mean_of_exactly_zero_counts_the_seeds_on_both_sides():
    """'Seeds that way' follows the mean's sign; a mean of exactly 0 has none, so both counts are given."""
    findings = report([finding_row([0.5, -0.25, -0.25, 0.0], config="rope"), finding_row([0.5, 0.3, -0.2])])
    text = headline_markdown(findings)
    assert "| 1 of 4 above +0.10, 2 below -0.10 |" in text
    assert "| 2 of 3 above +0.10 |" in text


def test_the_sentences_label_every_p_and_the_power_to_show_equivalence():
    findings = report([finding_row(VETOED, config="rope")])
    (sentence,) = sentences_markdown(findings).splitlines()
    assert sentence.startswith("- `rope` against `sinusoidal`, test set: mean difference +0.79 BLEU over 8 seeds, p ")
    assert "(against no difference, unadjusted; Holm " in sentence and "by the family's rule)" in sentence
    assert "power to show ±1.00 if the true difference were 0: " in sentence
    assert f"Exploratory (rule `{CURRENT.name}`): ahead by more than 0.10 BLEU (Holm p" in sentence


def test_a_withheld_verdict_is_worded_from_its_reason_not_from_its_finding() -> None:
    """Issue 76: the headline's cell says why a verdict is withheld from the reason the verdict code
    stored (study/records.Withheld), never by splitting the worded finding."""
    from study.pages.headline import short_verdict
    from study.records import Reading
    from study.terms import Withheld, Withholding

    row = finding_row(VETOED, config="rope")
    interim = Reading(
        "beyond_tie", outcome="withheld", finding="reworded", withheld=Withheld(Withholding.INTERIM, 3, 12)
    )
    assert short_verdict(interim, row, "sacreBLEU", 0.1, None) == "interim (3 of 12 planned seeds)"
    commit = Reading(
        "beyond_tie", outcome="withheld", finding="x; y", withheld=Withheld(Withholding.NOT_FROM_DECLARING_COMMIT)
    )
    said = short_verdict(commit, row, "sacreBLEU", 0.1, None)
    assert said == "descriptive: not every run of it was trained from a commit that declared the family"


def test_an_equivalence_verdict_gives_its_own_test_and_an_exploratory_reading_is_never_declared():
    """Issue 77: the headline's p column is the direction test's, so an equivalence verdict carries its
    equivalence Holm p in its own cell; the exploratory reading (another rule's) never says "declared",
    in the table, in the full sentence or in the findings record."""
    close = [0.05, -0.1, 0.12, 0.0, -0.05, 0.08, 0.02, -0.02]
    findings = report([finding_row(close, config="rope"), finding_row(VETOED, config="alibi")])
    rope = next(line for line in headline_markdown(findings).splitlines() if line.startswith("| `rope`"))
    assert "| equivalent within ±1.00 BLEU (equivalence Holm p " in rope
    (row, vetoed) = findings.tables[0].rows
    assert row.finding.startswith("equivalent within ±1.00 BLEU (equivalence Holm p ") and ", declared)" in row.finding
    assert vetoed.exploratory.outcome == "direction" and "declared" not in vetoed.exploratory.finding
    sentence = sentences_markdown(findings).splitlines()[1]
    assert "declared" not in sentence.split(f"Exploratory (rule `{CURRENT.name}`)")[1]
