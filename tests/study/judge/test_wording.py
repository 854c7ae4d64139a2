"""Wording a row (study/judge/wording.py): the same row reads by each rule's words, 'ahead in every
seed' / 'on average' under the older rule and 'ahead by more than the tie margin' under the current
one; the veto's 'inconclusive' says why; undeclared rows are descriptive; NLL is lower-is-better."""

from __future__ import annotations

from study.judge.wording import fmt_number, format_p, outcome, seed_signs, verdict
from study.records import RuleP
from tests.helpers import finding_row


def reading(rule: str, p_holm=0.001, p_eq=None) -> RuleP:
    return RuleP(rule, p_holm=p_holm, p_equivalence_holm=p_eq)


def test_each_rule_words_a_row_its_own_way():
    clear = finding_row([2.0, 2.5, 1.8, 2.2, 2.1])
    assert verdict(clear, reading("seed_veto"), "sacreBLEU", 0.1, declared=True).startswith(
        "ahead in every seed (Holm p 0.001"
    )
    assert verdict(clear, reading("beyond_tie"), "sacreBLEU", 0.1, declared=True).startswith(
        "ahead by more than 0.10 BLEU (Holm p 0.001, declared); seeds: 5 above +0.10"
    )
    assert verdict(clear, reading("beyond_tie"), "NLL", 0.01, declared=True).startswith(
        "behind by more than 0.010 nats"
    )
    tie = finding_row([2.0, 2.5, 1.8, 2.2, 0.05])
    assert verdict(tie, reading("seed_veto"), "sacreBLEU", 0.1, declared=True).startswith("ahead on average")
    against = finding_row([2.0, 2.5, 1.8, 2.2, -0.3])
    old = verdict(against, reading("seed_veto"), "sacreBLEU", 0.1, declared=True, equivalence=1.0)
    assert old.startswith("inconclusive: no direction worded (Holm p 0.001, but a seed lies beyond the tie margin")
    assert outcome(against, reading("beyond_tie"), 0.1, declared=True) == "direction"
    assert "ahead" not in verdict(clear, reading("beyond_tie"), "sacreBLEU", 0.1, declared=False)


def test_numbers_and_signs():
    assert (
        fmt_number(0.1234, "NLL") == "+0.123"
        and fmt_number(-1.5, "sacreBLEU") == "-1.50"
        and fmt_number(None, "NLL") == "–"
    )
    assert format_p(0.0004) == "<0.001" and format_p(0.004) == "0.004" and format_p(0.04) == "0.04"
    assert seed_signs([0.2, -0.2, 0.05], 0.1) == (1, 1, 1)
