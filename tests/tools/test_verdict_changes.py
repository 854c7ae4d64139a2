"""tools/verdict_changes.py: the verdicts that changed between two sets of findings, read from the
rows' outcome (or, for findings written before it, their wording); rows without a verdict on
either side are no change."""

from __future__ import annotations

import json

from tools import verdict_changes as vc


def findings(*rows: dict) -> str:
    return json.dumps({"tables": [{"name": "test", "rows": list(rows)}]})


def test_changed_verdicts_are_listed_and_quiet_rows_are_not():
    before = vc.verdicts(
        {
            "s_findings.json": findings(
                {
                    "config": "a",
                    "compared_on": "test set",
                    "finding": "ahead in every seed (Holm p 0.001, declared); x",
                },
                {"config": "b", "compared_on": "test set", "finding": "seeds: 1 above"},
                {"config": "c", "compared_on": "test set", "finding": "seeds: 1 above"},
            )
        }
    )
    after = vc.verdicts(
        {
            "s_findings.json": findings(
                {"config": "a", "compared_on": "test set", "outcome": "withheld", "finding": "interim (3 of 20)"},
                {"config": "b", "compared_on": "test set", "outcome": "equivalent", "finding": "equivalent within"},
                {"config": "c", "compared_on": "test set", "outcome": "descriptive", "finding": "seeds: 2 above"},
                {"config": "d", "compared_on": "k=4", "outcome": "descriptive", "finding": "seeds"},
            )
        }
    )
    assert before[("s_findings.json", "test", "a", "test set")] == "ahead in every seed"
    lines = vc.changes(before, after)
    assert lines[2:] == [
        "| s_findings.json | test | a | test set | ahead in every seed | withheld |",
        "| s_findings.json | test | b | test set | descriptive | equivalent |",
    ]


def test_the_exploratory_mode_lists_the_rows_whose_outcome_the_current_rule_changes():
    """--exploratory: a declared row of an older-rule family whose exploratory outcome differs; a row
    worded differently with the same outcome (a direction under both rules) is no change."""

    def row(config: str, outcome: str, finding: str) -> dict:
        now = {"outcome": "direction", "finding": "ahead by more than 0.10 BLEU (Holm p 0.001, declared); x"}
        return {"config": config, "compared_on": "test set", "outcome": outcome, "finding": finding, "exploratory": now}

    changed = row("a", "inconclusive", "inconclusive: no direction worded")
    same = row("b", "direction", "ahead in every seed (Holm p 0.001, declared); x")
    declared, current = vc.exploratory({"s_findings.json": findings(changed, same)})
    assert vc.changes(declared, current)[2:] == [
        "| s_findings.json | test | a | test set | inconclusive | ahead by more than 0.10 BLEU |"
    ]
