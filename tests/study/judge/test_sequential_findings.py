"""A sequential family's findings look by look (study/judge/sequential_findings.py): a look reads the first
n_k seeds of the declared list, a comparison is worded at the look that decided it (and stays so),
a decided configuration needs no more seeds, runs beyond the stop are not counted, and a study
before its first look or between looks words nothing yet."""

from __future__ import annotations

import json
import random

import pytest

from tests.helpers import nll_beyond_run

SEEDS = [5, 3, 1, 4, 2]  # declared order: the first look (3 seeds) is 5, 3, 1 — not the lowest seeds


@pytest.fixture
def study(tmp_path):
    """make(config, seeds, effect(seed)) -> a configuration of runs whose teacher-forced NLL beyond
    training is lower by effect(seed) nats than the baseline's, on 60 inputs."""
    from study.records import Configuration

    def run(name: str, seed: int, better: float):
        # the same inputs' noise in every configuration of a seed
        return nll_beyond_run(tmp_path, name, seed, better, random.Random(seed))

    def make(name: str, seeds, effect) -> Configuration:
        return Configuration(tuple(run(name, s, effect(s)) for s in seeds), f"study/{name}", name)

    return make


def findings_of(groups, looks=(3, 5), **family):
    from study.judge.report import compute_findings
    from study.read.family import Family
    from study.read.study import read_compared

    declared = Family(
        headline=[{"table": "teacher_forced"}],
        seeds=SEEDS[: looks[-1]],
        looks=tuple(looks),
        equivalence={"NLL": 0.1},
        rule="beyond_tie",
        **family,
    )
    return compute_findings(read_compared(groups, groups[0], declared), n_samples=1000)


def rows_of(findings):
    (table,) = [t for t in findings.tables if t.name == "teacher_forced"]
    return {r.config: r for r in table.rows}


def test_a_comparison_is_decided_at_its_first_look_from_the_declared_seeds(study) -> None:
    base = study("base", SEEDS, lambda s: 0.0)
    better = study("better", SEEDS, lambda s: 0.3)
    same = study("same", SEEDS, lambda s: 0.0)
    findings = findings_of([base, better, same])
    rows = rows_of(findings)
    ahead, level = rows["study/better"], rows["study/same"]
    assert ahead.seeds == (5, 3, 1) and level.seeds == (5, 3, 1)  # the look's seeds, in the declared order
    assert ahead.look.look == 1 and ahead.look.decided and ahead.look.direction == -1  # lower NLL: ahead
    assert ahead.outcome == "direction" and "decided at look 1 of 2, 3 seeds (declared)" in ahead.finding
    assert ahead.finding.startswith("ahead by more than 0.010 nats (p ")
    assert level.outcome == "equivalent" and level.finding.startswith("equivalent within ±0.100 nats (equivalence p")
    low, high = ahead.look.repeated
    assert low < ahead.seed_test.low and high > ahead.seed_test.high  # the repeated interval is the wider one
    plan = findings.sequential
    assert (plan.reached, plan.taken, plan.stopped, plan.not_counted) == (1, 1, True, (4, 2))
    assert findings.interim is None  # stopped: the study is complete
    from dataclasses import replace

    from study.pages.headline import headline_markdown

    text = headline_markdown(replace(findings, family="configs/study/findings/headline.yaml"))
    assert "stopped at look 1 of 2 (3 seeds, every comparison decided)" in text
    assert "not counted: 4, 2" in text and "| look 1 of 2 (3 seeds) |" in text


def test_before_the_first_look_and_between_looks_nothing_is_worded(study) -> None:
    base = study("base", SEEDS[:2], lambda s: 0.0)
    better = study("better", SEEDS[:2], lambda s: 0.3)
    early = findings_of([base, better])
    row = rows_of(early)["study/better"]
    assert row.outcome == "withheld" and row.finding.startswith("interim (2 of the 3 seeds of the first look)")
    assert (early.interim.seeds, early.interim.planned, early.interim.look) == (2, 3, 1)
    # a comparison open after look 1 (a small difference, noisy seeds) waits for look 2
    noise = {5: 0.08, 3: -0.06, 1: 0.02, 4: 0.05, 2: -0.03}
    base = study("base2", SEEDS[:4], lambda s: 0.0)
    noisy = study("noisy", SEEDS[:4], lambda s: noise[s])
    between = findings_of([base, noisy], looks=(3, 5))
    row = rows_of(between)["study/noisy"]
    assert row.seeds == (5, 3, 1) and not row.look.decided and row.look.next_seeds == 5
    assert row.outcome == "withheld" and row.finding.startswith("open after look 1 of 2, 3 seeds (p ")
    assert "no verdict until the look at 5 seeds" in row.finding
    assert (between.interim.seeds, between.interim.planned, between.interim.look) == (4, 5, 2)
    assert not between.sequential.stopped


def test_a_decided_configuration_needs_no_more_seeds_and_passes_its_alpha_on(study) -> None:
    noise = {5: 0.08, 3: -0.06, 1: 0.02, 4: 0.05, 2: -0.03}
    base = study("base", SEEDS, lambda s: 0.0)
    better = study("better", SEEDS[:3], lambda s: 0.3)  # decided at look 1: never run further
    noisy = study("noisy", SEEDS, lambda s: 0.15 + 0.6 * noise[s])
    findings = findings_of([base, better, noisy])
    rows = rows_of(findings)
    assert rows["study/better"].look.look == 1 and rows["study/better"].look.decided
    assert findings.sequential.reached == 2 and findings.sequential.stopped
    row = rows["study/noisy"]
    assert row.look.look == 2 and row.look.last and row.seeds == tuple(SEEDS)
    assert "decided at look 2 of 2, 5 seeds" in row.finding
    # its boundary is the whole α's at the last look: the decided comparison passed its share on
    assert 0.03 < row.look.boundary < 0.05
    # alone at the last look with neither test passed: inconclusive, said so with the seeds used
    wide = study("wide", SEEDS, lambda s: 0.05 + 2 * noise[s])
    last = findings_of([base, wide])
    row = rows_of(last)["study/wide"]
    assert row.outcome == "inconclusive" and row.look.look == 2 and not row.look.decided
    assert row.finding.startswith("inconclusive: the last look (look 2 of 2, 5 seeds) came without a decision (p ")
    # the pages of a plan that ran to its last look (they raised IndexError there: no look after the last)
    from dataclasses import replace

    from study.pages.headline import headline_markdown

    for done in (findings, last):
        text = headline_markdown(replace(done, family="configs/study/findings/headline.yaml"))
        assert "; stopped at look 2 of 2 (5 seeds, the last look)." in text and "going on" not in text


def test_the_findings_json_carries_each_look(study) -> None:
    from study.pages.serialize import findings_json

    base = study("base", SEEDS, lambda s: 0.0)
    better = study("better", SEEDS, lambda s: 0.3)
    data = json.loads(findings_json(findings_of([base, better])))
    assert data["sequential"]["looks"] == [3, 5] and data["sequential"]["taken"] == 1
    (row,) = [r for t in data["tables"] for r in t["rows"] if r["declared"]]
    assert row["look"]["look"] == 1 and row["look"]["decided"] and row["p_holm"] is None
