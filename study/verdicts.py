"""Wording the findings tables (study/findings.py computes the rows) by the family's named rule
(study/rules.py): Holm's correction over the declared family, once over the rule's decision p
and once, apart, over the equivalence tests (study/equivalence.py); the study's plan (an
interim study words no verdict, and a row whose runs were not trained from a commit that declared the
family stays descriptive). A family declared under an older rule also gets the current rule's
reading of each declared row, labelled exploratory (`exploratory`: the rule changed after its runs).
Each row's smallest detectable effect and, for a declared row, the power of showing equivalence and
the seeds either would need, by the current rule."""

from __future__ import annotations

from typing import Optional

import numpy as np

from study.equivalence import equivalence_power, seeds_for_equivalence
from study.family import Family
from study.rules import CURRENT, RULES, Rule
from study.seed_test import ALPHA, detectable_effect, seeds_needed, shared_variance
from study.significance import holm
from study.wording import outcome, verdict
from utils.runtime import log

NOT_FROM_DECLARING_COMMIT = "descriptive: not every run of it was trained from a commit that declared the family"


def interim(tables: list[dict], family: Family, missing: int = 0) -> Optional[dict]:
    """{seeds, planned} when the family plans seeds that some declared comparison does not have yet
    (the fewest planned seeds any declared row holds; a declared comparison with no row at all, e.g.
    a configuration not run yet, holds none), else None: the study is complete."""
    if not family.seeds:
        return None
    planned = set(family.seeds)
    held = [len(planned & set(r["seeds"])) for t in tables for r in t["rows"] if r.get("declared")]
    fewest = 0 if missing else min(held, default=0)
    return None if fewest == len(planned) else {"seeds": fewest, "planned": len(planned)}


METRIC_OF = {"degradation": "NLL", "teacher_forced": "NLL"}  # the other tables are sacreBLEU


def missing_rows(tables: list[dict], family: Family, configs: Optional[list[str]] = None) -> list[tuple[str, str]]:
    """(table, config) of every declared comparison that has no row: an entry naming its `compared_on`,
    for each configuration it names (or, for an entry naming none, each compared configuration:
    `configs`), with no such row.
    They count in Holm's family as p = 1 and keep a planned study interim."""
    have = {(t["name"], r["config"], r["compared_on"]) for t in tables for r in t["rows"]}
    out = []
    for h in family.headline:
        if h.get("compared_on") is None:
            continue
        for config in h.get("configs") or configs or []:  # (no list given: only the configs an entry names)
            if (h["table"], config, h["compared_on"]) not in have:
                out.append((h["table"], config))
    return out


def _absent(missing: list[tuple[str, str]]) -> list[dict]:
    """Stand-ins for the declared comparisons without a row: p = 1 in each Holm family they belong to."""
    return [{"metric": METRIC_OF.get(table, "sacreBLEU")} for table, _ in missing]


def _equivalence_size(tables: list[dict], family: Family, absent: list[dict]) -> int:
    """The size of the equivalence tests' Holm family: the declared rows (and stand-ins) of a measure
    with a margin."""
    rows = [r for t in tables for r in t["rows"] if r["declared"] and family.equivalence.get(t["metric"])]
    return len(rows) + sum(bool(family.equivalence.get(a["metric"])) for a in absent)


def _holm_over(rows: list[dict], key: str, adjusted_key: str) -> None:
    """Holm over `rows` by their p `key` into `adjusted_key` (a row without a p counts as p = 1: the
    family is the size declared, and its adjusted p stays None)."""
    adjusted = holm([r[key] if r[key] is not None else 1.0 for r in rows])
    for r, p in zip(rows, adjusted):
        r[adjusted_key] = p if r[key] is not None else None


def _readings(tables: list[dict], family: Family, rule: Rule, declared: list[dict], absent: list[dict]) -> dict:
    """{id(row): reading} of every row under `rule`: the decision p and the equivalence p of each
    declared row, each Holm-adjusted over the family (a declared comparison without a row: p = 1)."""
    readings = {
        id(r): {"rule": rule.name, "p_rule": None, "p_holm": None, "p_equivalence": None, "p_equivalence_holm": None}
        for t in tables
        for r in t["rows"]
    }
    margins = {
        id(r): (family.tie_margin[t["metric"]], family.equivalence.get(t["metric"])) for t in tables for r in t["rows"]
    }
    stand_ins = [{"p_rule": None, "p_equivalence": None, "metric": a["metric"]} for a in absent]
    for r in declared:
        if r.get("p_value") is None:
            continue
        diffs = np.array([s["difference"] for s in r["per_seed"]])
        known = rule.known(r["seed_test"])
        tie, equivalence = margins[id(r)]
        reading = readings[id(r)]
        reading["p_rule"] = float(rule.decision_p(diffs, known, tie))
        if equivalence:
            reading["p_equivalence"] = float(rule.equivalence_p(diffs, known, equivalence))
    _holm_over([readings[id(r)] for r in declared] + stand_ins, "p_rule", "p_holm")
    equivalent = [readings[id(r)] for r in declared if margins[id(r)][1]]
    _holm_over(
        equivalent + [a for a in stand_ins if family.equivalence.get(a["metric"])],
        "p_equivalence",
        "p_equivalence_holm",
    )
    return readings


def _withheld(r: dict, family: Family, plan: Optional[dict]) -> Optional[str]:
    if plan:
        held = len(set(family.seeds) & set(r["seeds"]))
        return f"interim ({held} of {plan['planned']} planned seeds): no verdict"
    return None if r.get("from_declaring_commit", True) else NOT_FROM_DECLARING_COMMIT


def _word(tables: list[dict], family: Family, readings: dict, plan: Optional[dict]) -> None:
    """Each reading's outcome and finding."""
    for t in tables:
        margin, equivalence = family.tie_margin[t["metric"]], family.equivalence.get(t["metric"])
        for r in t["rows"]:
            reading, withheld = readings[id(r)], _withheld(r, family, plan)
            reading["outcome"] = outcome(r, reading, margin, r["declared"], equivalence, withheld)
            finding = verdict(r, reading, t["metric"], margin, r["declared"], equivalence, withheld)
            reading["finding"] = f"{r['joined_range']}; {finding}" if r.get("joined_range") else finding


def apply_rule(tables: list[dict], family: Family, configs: Optional[list[str]] = None) -> int:
    """Every row's reading by the family's rule (its p, Holm p, equivalence p, outcome and finding on
    the row itself) and, for a declared row of a family under an older rule, the current rule's reading
    (`exploratory`); returns the family's size (a declared comparison without a row counts, as p = 1:
    `missing_rows`)."""
    declared = [r for t in tables for r in t["rows"] if family.declares(t["name"], r)]
    missing = missing_rows(tables, family, configs)
    for t in tables:
        for r in t["rows"]:
            r["declared"] = False
            r.pop("exploratory", None)
    for r in declared:
        r["declared"] = True
    absent = _absent(missing)
    plan = interim(tables, family, len(missing))
    rule = RULES[family.rule]
    readings = _readings(tables, family, rule, declared, absent)
    _word(tables, family, readings, plan)
    for t in tables:
        for r in t["rows"]:
            r.update(readings[id(r)])
            if rule.veto and r.get("p_value") is not None:  # the older rule's SE, in a field of its own
                r["seed_test"]["se_seed_veto"] = rule.se(r["seed_test"])
    if rule is not CURRENT:
        current = _readings(tables, family, CURRENT, declared, absent)
        _word(tables, family, current, plan)
        for r in declared:
            r["exploratory"] = current[id(r)]
    return len(declared) + len(missing)


def check_entries(tables: list[dict], family: Family) -> None:
    """A declared entry whose table has rows but none compared on its label is a typo (`test sett`, a
    non-breaking space): refused in one line naming the labels there are, never a smaller family."""
    from settings.config import ConfigError

    for i, h in enumerate(family.headline):
        labels = sorted({r["compared_on"] for t in tables if t["name"] == h["table"] for r in t["rows"]})
        if labels and h.get("compared_on") is not None and h["compared_on"] not in labels:
            raise ConfigError(
                f"{family.path}: headline[{i}].compared_on {h['compared_on']!r} is no row of the {h['table']} table "
                f"(its rows: {', '.join(map(repr, labels))}); correct it: a declared comparison that matches "
                f"nothing would leave the family smaller than declared"
            )


def unmatched(tables: list[dict], family: Family) -> list[str]:
    """The headline entries that match no row (a typo, or a measure these runs did not record)."""
    return [
        str(h)
        for h in family.headline
        if not any(h in family.matching(t["name"], r) for t in tables for r in t["rows"])
    ]


def row_power(r: dict, metric: str, alpha: float, alpha_equivalence: float, family: Family) -> None:
    """A tested row's planning figures by the current rule (study/rules.py): the smallest true
    difference its seeds word as a direction 80% of the time (two-sided at `alpha`, beyond the tie
    margin) and the seeds the declared effect would need; for a declared row with an equivalence margin,
    the power of showing equivalence if the true difference were 0 and the seeds that would need."""
    t = r.get("seed_test")
    if not t or t["se"] is None:
        return
    shared, tie = shared_variance(t), family.tie_margin[metric]
    r["detectable"] = detectable_effect(t["se"], t.get("df"), alpha, tie)
    r["seeds_needed"] = seeds_needed(family.effect[metric], t["seed_sd"], shared, alpha, tie)
    margin = family.equivalence.get(metric)
    if r.get("declared") and margin:
        r["equivalence_power"] = equivalence_power(margin, t["seed_sd"], t["n"], shared, alpha_equivalence)
        r["seeds_for_equivalence"] = seeds_for_equivalence(margin, t["seed_sd"], shared, alpha_equivalence)


def word_tables(
    tables: list[dict], family: Family, configs: Optional[list[str]] = None
) -> tuple[int, list[str], Optional[dict]]:
    """Word every row by the rule (Holm over the declared family) and add each row's power (at
    Holm's first step, `alpha` of each table); returns (the family's size, the declared entries no
    row matched, the interim plan or None)."""
    check_entries(tables, family)
    size = apply_rule(tables, family, configs)
    unmatched_entries = unmatched(tables, family)
    for entry in unmatched_entries:
        log(f"compare.py: the declared headline comparison {entry} of {family.path} matches no row of these runs")
    if family.path and family.rule != CURRENT.name:
        log(
            f"compare.py: {family.path} is decided by rule {family.rule} (the rule it was declared under; a file "
            f"naming none was declared before rules had names), with the current rule's reading beside it, "
            f"labelled exploratory; a new family names `rule: {CURRENT.name}`"
        )
    missing = missing_rows(tables, family, configs)
    alpha = ALPHA / size if size else ALPHA  # Holm's first step: what the strongest declared row must pass
    equivalent = _equivalence_size(tables, family, _absent(missing))
    alpha_equivalence = ALPHA / equivalent if equivalent else ALPHA  # the same for the equivalence family
    for t in tables:
        t["family_rows"] = sum(r["declared"] for r in t["rows"])
        for r in t["rows"]:
            row_power(r, t["metric"], alpha, alpha_equivalence, family)
        t["alpha"] = alpha
    return size, unmatched_entries, interim(tables, family, len(missing))
