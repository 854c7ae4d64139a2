"""The findings (study/judge/findings.py): the teacher-forced NLL beyond training tested per input over
every k; the rows' labels (the selection's k, a joined-pair study's k)."""

from __future__ import annotations

import random

import pytest

from tests.helpers import NLL_INPUTS, nll_beyond_run


def test_findings_test_the_nll_beyond_training_per_input(tmp_path):
    """compare.py's findings: the teacher-forced NLL beyond training, pooled over every k, tested
    by resampling inputs; lower is ahead. Declared, a configuration 0.3 nats better in every seed
    is found ahead in every seed; the baseline against a copy of itself is level (p 1)."""
    from study.judge.report import compute_findings
    from study.pages.findings_markdown import findings_markdown
    from study.read.family import Family
    from study.read.study import read_compared
    from study.records import Configuration, RunRecord

    rng = random.Random(5)
    inputs = NLL_INPUTS

    def run(name: str, seed: int, better: float, length: int = 21) -> RunRecord:
        return nll_beyond_run(tmp_path, name, seed, better, rng, length)

    base = Configuration(tuple(run("s", s, 0.0) for s in (1, 2, 3)), "length/sinusoidal", "sinusoidal")
    good = Configuration(tuple(run("a", s, 0.3) for s in (1, 2, 3)), "length/alibi", "alibi")
    same = Configuration(base.runs, "length/copy", "sinusoidal")
    # trained on joined pairs: longer training lengths, so "beyond" means other tokens: not tested
    joined = Configuration(tuple(run("j", s, 0.5, 44) for s in (1, 2, 3)), "length/alibi_concat", "alibi")
    family = Family(
        headline=[{"table": "teacher_forced"}], rule="beyond_tie"
    )  # declared: it may be worded as a direction
    findings = compute_findings(read_compared([base, good, same, joined], base, family), n_samples=2000)
    (table,) = [t for t in findings.tables if t.name == "teacher_forced"]
    rows = {r.config: r for r in table.rows}
    assert "length/alibi_concat" not in rows
    assert rows["length/alibi"].num_sentences == len(inputs)
    assert all(d < -0.01 for d in rows["length/alibi"].differences)
    assert rows["length/alibi"].mean_difference == pytest.approx(-0.3, abs=0.06)
    assert rows["length/alibi"].finding.startswith("ahead by more than 0.010 nats (Holm p")  # lower NLL is ahead
    assert rows["length/copy"].p_value == 1.0 and rows["length/copy"].finding.startswith("seeds: 0 above")
    text = findings_markdown(findings)
    assert "Δ NLL (lower is better), mean over seeds" in text and "lower is better for NLL" in text
    undeclared = compute_findings(read_compared([base, good], base), n_samples=2000)  # no family: descriptive
    assert not undeclared.tables[-1].rows[0].finding.startswith("ahead")
    # a run that recorded no training length writes only the header: no data, never "ahead"
    from study.read.run_outputs import nll_beyond

    empty = tmp_path / "unrecorded" / "test"
    empty.mkdir(parents=True)
    (empty / "teacher_forced_beyond.tsv").write_text("k\tinput\ttokens\tnll_no_eos_sum\n")
    assert nll_beyond(RunRecord(run=str(empty.parent))) is None


def test_a_degradation_selection_speaks_for_its_own_k_or_the_first_beyond_the_joined_range() -> None:
    from study.terms import ALL_K, Span, SpanKind

    assert Span(SpanKind.AT_K, 4).at_k == 4 and Span(SpanKind.AT_K, 4).label == "degradation, k=4"
    beyond = Span(SpanKind.BEYOND_JOINED, 2)
    assert beyond.at_k == 3 and beyond.column == "beyond joined training (k > 2)"
    assert ALL_K.at_k is None and ALL_K.label == "degradation, all k"
    assert Span(SpanKind.START_BUCKET, start=(8, None)).column == "start 8+"


def test_a_stale_test_is_left_out_of_the_paired_tests(tmp_path):
    """A run whose test scored a checkpoint training has since bettered (RunRecord.stale_test,
    artifacts/tested_run.py) is marked in the tables but paired with no baseline seed: its seed
    counts in no comparison, as if untested, until test.py scores it again."""
    from dataclasses import replace

    from study.judge.report import compute_findings
    from study.read.run_stats import seed_wins
    from study.read.study import read_compared
    from study.records import Configuration

    rng = random.Random(5)
    base = Configuration(tuple(nll_beyond_run(tmp_path, "s", s, 0.0, rng) for s in (1, 2, 3)), "length/sinusoidal")
    runs = [nll_beyond_run(tmp_path, "a", s, 0.3, rng) for s in (1, 2, 3)]
    runs[1] = replace(runs[1], stale_test="test/ scored the checkpoint of step 6, ...")
    good = Configuration(tuple(runs), "length/alibi", "alibi")
    findings = compute_findings(read_compared([base, good], base), n_samples=200)
    (table,) = [t for t in findings.tables if t.name == "teacher_forced"]
    (row,) = [r for r in table.rows if r.config == "length/alibi"]
    assert len(row.differences) == 2  # seeds 1 and 3: seed 2's stale test is not compared
    assert seed_wins(good.runs, base.runs, lambda r: 1.0) == (0, 2)
