"""The findings report of a study: its rows tested, read by its design and worded, with the method's
settings beside them (`compute_findings`); and the findings' p copied back into the configurations,
so that one comparison has one p wherever it is printed (`add_significance`)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Optional, Sequence

from study.judge.design import design_for
from study.judge.findings import Comparison, OnSet, findings_tables
from study.judge.sequential_findings import restricted, with_rows
from study.judge.verdicts import word_tables
from study.read.family import Family
from study.read.set_runs import SetStudy
from study.read.study import Study
from study.records import Configuration, Findings, FindingsTable, Interim, RuleText, frozen_map
from study.stats.rules import CURRENT, RULES
from study.stats.seed_test import ALPHA, MODEL
from study.stats.significance import DEFAULT_SEED
from study.terms import Joined, Measure, RowKey, Table, WholeTestSet

RULE = (
    "Finding, by the rule the family names: 'ahead'/'behind' only for a comparison declared in the study's "
    "headline family whose decision p, Holm-adjusted over that family, is below "
    f"{ALPHA} (lower is better for NLL); 'equivalent within ±m' only for a declared comparison whose equivalence p "
    "(two one-sided seed-level tests against -m and +m, the larger p) is below "
    f"{ALPHA} after Holm's correction over the equivalence rows, apart; both for a small difference inside the "
    "margin, 'inconclusive' for neither. No verdict while the study is interim (a declared comparison lacks "
    "some of the family's planned seeds), nor for a row whose runs were not all trained (and, where the test "
    "records it, tested) at a commit that declared the family. Every other row gives how the seeds fall "
    "against the tie margin and the 95% interval of the mean difference, and no verdict."
)
ACROSS = (
    " A comparison declared across the family's test sets (`claim: across`): 'ahead'/'behind across' only "
    "where every set's test beyond the tie margin passes that way (an intersection-union test, Berger 1982: its "
    "p is the largest of its sets' decision p's, so the sets cost no multiplicity), 'equivalent across' likewise "
    "with TOST, 'depends on the test set' where two sets pass in opposite directions, each set's row beside it; "
    "no verdict while a declared set lacks the test of one of its seeds."
)
# the findings' `test`: the seed-level model and its sidedness (the p against no difference and the 95%
# interval are two-sided, and so is each rule's decision p; TOST's are one-sided each, EQUIVALENCE_TEST)
TEST = (
    f"{MODEL}; two-sided: p = 2 P(t_df > |T|) against no difference, the 95% interval mean(d) +- t_0.975,df SE; "
    "each rule's decision p (study/stats/rules.py) is two-sided too"
)
EQUIVALENCE_TEST = (
    "TOST (Schuirmann 1987): the seed-level statistic of the family's rule tested one-sided against -m and "
    "against +m; equivalence p = max(p_lower, p_upper); Holm over the declared rows apart"
)


def compute_findings(study: Study, n_samples: int = 10000, seed: int = DEFAULT_SEED) -> Findings:
    """Every configuration of `study` against its baseline, as tables of findings."""
    family, groups, baseline = study.family, study.groups, study.baseline
    context = Comparison(study.outputs, study.proven, n_samples, seed, study.tested_off)
    configs = [g.label for g in groups if g.label != baseline.label]

    @functools.lru_cache(maxsize=None)  # a sequential family under an older rule reads its looks twice
    def built(seeds: Optional[tuple]) -> tuple[FindingsTable, ...]:
        chosen = list(groups) if seeds is None else restricted(groups, seeds)
        on_sets = [on_set(s, seeds) for s in study.sets if s.baseline is not None]
        return tuple(findings_tables(chosen, next(g for g in chosen if g.label == baseline.label), context, on_sets))

    def on_set(s: SetStudy, seeds: Optional[tuple]) -> OnSet:
        chosen = list(s.groups) if seeds is None else restricted(s.groups, seeds)
        base = next(g for g in chosen if g.is_baseline)
        return OnSet(s.test_set.name, chosen, base, replace(context, outputs=s.outputs), s.test_set.max_source_tokens)

    def build(seeds: Optional[Sequence]) -> tuple[FindingsTable, ...]:  # (None: every seed)
        return built(None if seeds is None else tuple(seeds))

    tables, design = design_for(family).read(build, family, configs)
    worded, size, missing, plan = word_tables(tables, family, configs, design)
    if design.current_reads_apart and family.path and family.rule != CURRENT.name:  # its own looks, exploratory
        current = family.model_copy(update={"rule": CURRENT.name})
        again, current_design = design_for(current).read(build, current, configs)
        readings = {r.key: r.reading for t in word_tables(again, current, configs, current_design)[0] for r in t.rows}
        worded = with_rows(worded, lambda i, j, r: replace(r, exploratory=readings[r.key]) if r.declared else r)
    return design.record(findings_report(baseline.label, family, size, missing, n_samples, seed, worded, plan))


def findings_report(
    baseline: str,
    family: Family,
    size: int,
    missing: Sequence[str],
    n_samples: int,
    seed: int,
    tables: Sequence[FindingsTable],
    plan: Optional[Interim] = None,
) -> Findings:
    """The findings report: the method's settings beside the tables."""
    return Findings(
        baseline=baseline,
        metric=Measure.SACREBLEU,
        alpha=ALPHA,
        test=TEST,
        correction="holm, over the declared headline family only",
        family=family.path,
        decision_rule=RuleText(family.rule, RULES[family.rule].summary),
        exploratory_rule=(
            None if family.path is None or family.rule == CURRENT.name else RuleText(CURRENT.name, CURRENT.summary)
        ),
        family_size=size,
        family_unmatched=tuple(missing),
        tie_margin=frozen_map(family.tie_margin.given()),
        equivalence_margin=frozen_map(family.equivalence.given()),
        equivalence_test=EQUIVALENCE_TEST,
        planned_seeds=tuple(family.seeds) if family.seeds is not None else None,
        planned_device=family.device,
        planned_precision=family.precision,
        interim=plan,
        descriptive_p="sacreBLEU's paired bootstrap per seed (sacrebleu --paired-bs: Koehn's statistic, one "
        "tail; it holds each trained model fixed), descriptive only",
        n_samples=n_samples,
        bootstrap_seed=seed,
        rule=RULE + (ACROSS if any(not s.own for s in family.test_sets or ()) else ""),
        tables=tuple(tables),
    )


def add_significance(
    groups: Sequence[Configuration], baseline: Configuration, findings: Findings
) -> list[Configuration]:
    """Each group with the findings' p against the baseline on the test set (k = 1) and per k."""

    def p_of(config: str, k: int) -> Optional[float]:
        key = RowKey(Table.TEST, config, WholeTestSet()) if k == 1 else RowKey(Table.CONCAT, config, Joined(k))
        row = findings.row(key)
        return row.p_value if row else None

    return [
        g
        if g.label == baseline.label
        else replace(
            g,
            p_value=p_of(g.label, 1),
            concat=frozen_map((k, replace(c, p_value=p_of(g.label, k))) for k, c in g.concat.items()),
        )
        for g in groups
    ]
