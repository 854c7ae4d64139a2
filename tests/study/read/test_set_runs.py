"""A study's runs on each file pair its family declares (study/read/set_runs.py, issue 78): read from each
run's test_set_<name>/ into configurations of their own, compared on that set as rows of the test table
(study/judge/findings.py: `OnSet`); a run lacking the test is listed; a test of other bytes is refused."""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil
from pathlib import Path

import pytest
from helpers import ROOT

from study.pages.summary_tables import sets_table
from study.read.run_records import CompareError
from study.read.study import read_study
from study.terms import Table, WholeTestSet

pytestmark = pytest.mark.slow  # (about 5 s each: archived runs read whole)
ARCHIVED = ROOT / "results" / "demo_confirm"
RUNS = ("sinusoidal", "sinusoidal_seed102", "rope", "rope_seed102")


def study_on_sets(tmp_path: Path) -> tuple[Path, str]:
    """Four archived demo_confirm runs whose test is also stored as test_set_twin/ and test_set_short/ (the
    same sentences, as if scored from a declared file pair), and a family declaring the own split, `twin`
    and `short` (sources of at most 6 subword tokens); (runs, family)."""
    pair = {side: tmp_path / "data" / f"twin.{side}" for side in ("src", "ref")}
    pair["src"].parent.mkdir()
    for side, path in pair.items():
        path.write_text(f"the {side} file of the twin set\n", encoding="utf-8")
    sides = {side: hashlib.sha256(path.read_bytes()).hexdigest() for side, path in pair.items()}
    runs = tmp_path / "results"
    shutil.copytree(ARCHIVED / "test_sets", runs / "test_sets")  # the study's shared references
    for name in RUNS:  # (each test of single sentences only, as sweep.py tests a pair: reading joined inputs is slow)
        shutil.copytree(ARCHIVED / name, runs / name, ignore=shutil.ignore_patterns("concat", "teacher_forced_*"))
        for folder in ("test", "test_set_twin", "test_set_short"):
            copy = runs / name / folder
            if folder != "test":
                shutil.copytree(runs / name / "test", copy)
            scores = json.loads(lzma.decompress((copy / "scores.json.xz").read_bytes()))
            if folder != "test":
                scores["test_set"] = {"src": str(pair["src"]), "ref": str(pair["ref"]), "sha256": sides}
            scores["concat"] = [row for row in scores["concat"] if row["k"] == 1]
            scores.pop("teacher_forced", None)
            (copy / "scores.json.xz").write_bytes(lzma.compress(json.dumps(scores).encode(), format=lzma.FORMAT_XZ))
    (tmp_path / "configs").mkdir()
    family = tmp_path / "configs" / "headline.yaml"
    files = f"src: data/twin.src, ref: data/twin.ref, sha256: {{src: {sides['src']}, ref: {sides['ref']}}}"
    family.write_text(
        "baseline: sinusoidal\nrule: beyond_tie_exact\nheadline:\n  - {table: test, compared_on: test set}\n"
        "test_sets:\n  - {name: own}\n"
        f"  - {{name: twin, {files}}}\n  - {{name: short, {files}, max_source_tokens: 6}}\n",
        encoding="utf-8",
    )
    return runs, str(family)


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    import study.read.family

    monkeypatch.setattr(study.read.family, "CONFIGS", tmp_path / "configs")  # the family's project
    return tmp_path


def test_each_declared_pair_is_read_and_compared_as_rows_of_its_own(project: Path) -> None:
    from study.judge.report import compute_findings

    runs, family = study_on_sets(project)
    study = read_study([str(runs / "*")], family)
    twin, short = study.sets
    assert twin.test_set.name == "twin" and twin.missing == () and twin.baseline.label == "demo_confirm/sinusoidal"
    assert [g.n for g in twin.groups] == [2, 2]
    test = next(t for t in compute_findings(study, n_samples=200).tables if t.name == Table.TEST)
    rows = {(r.config, r.key.on): r for r in test.rows}
    own, on_twin = rows["demo_confirm/rope", WholeTestSet()], rows["demo_confirm/rope", WholeTestSet("twin")]
    # the same sentences and outputs: the same per-seed differences, on a row labelled by its set
    assert on_twin.differences == own.differences and on_twin.seeds == own.seeds
    assert on_twin.key.label == "test set twin" and own.key.label == "test set"
    assert not on_twin.declared  # (the declared comparison is the own split's row; the sets stand beside it)
    # a length rule: only the sources of at most 6 subword tokens are compared
    assert 0 < rows["demo_confirm/rope", WholeTestSet("short")].num_sentences < own.num_sentences
    # the page's scores on each set: without a length rule test.py's sacreBLEU; with one, on the sentences
    # the rows compare
    rope = [next(g for g in s.groups if g.label == "demo_confirm/rope") for s in (twin, short)]
    whole, chosen, total = twin.compared_bleu(rope[0])
    assert chosen == total == own.num_sentences and whole.n == 2
    assert whole.mean == pytest.approx(sum(r.scores["sacrebleu"] for r in rope[0].runs) / 2, abs=0.006)
    bleu, chosen, total = short.compared_bleu(rope[1])
    assert (chosen, total) == (rows["demo_confirm/rope", WholeTestSet("short")].num_sentences, own.num_sentences)
    assert bleu.n == 2 and bleu.mean != pytest.approx(whole.mean)
    table = sets_table(study.groups, study.sets, "own")
    assert f"| short (n={total}; compared: {chosen}, sources ≤ 6 tokens) | demo_confirm/rope | 2 |" in table
    assert "| own (own split) | demo_confirm/rope | 2 |" in table and sets_table(study.groups, (), "own") == ""


def test_a_run_without_the_declared_test_is_listed_and_another_test_refused(project: Path) -> None:
    runs, family = study_on_sets(project)
    shutil.rmtree(runs / "rope_seed102" / "test_set_twin")
    twin, _ = read_study([str(runs / "*")], family).sets
    assert twin.missing == ("demo_confirm/rope seed 102",)
    assert {g.label: g.n for g in twin.groups} == {"demo_confirm/rope": 1, "demo_confirm/sinusoidal": 2}
    scores = runs / "rope" / "test_set_twin" / "scores.json.xz"
    held = json.loads(lzma.decompress(scores.read_bytes()))
    held["test_set"] = {"src": "other.fr", "ref": "other.en", "sha256": {"src": "0" * 64, "ref": "0" * 64}}
    scores.write_bytes(lzma.compress(json.dumps(held).encode(), format=lzma.FORMAT_XZ))
    with pytest.raises(
        CompareError,
        match=r"rope/test_set_twin is a test of other files than the declared test set 'twin' "
        r"\(its src other\.fr has sha256 000000000000…",
    ):
        read_study([str(runs / "*")], family)
    declared = {
        side: hashlib.sha256((project / "data" / f"twin.{side}").read_bytes()).hexdigest() for side in ("src", "ref")
    }
    held["test_set"]["sha256"]["src"] = declared["src"]  # only the reference differs: the line says so
    scores.write_bytes(lzma.compress(json.dumps(held).encode(), format=lzma.FORMAT_XZ))
    with pytest.raises(CompareError) as e:
        read_study([str(runs / "*")], family)
    said = str(e.value)
    assert f"(its ref other.en has sha256 000000000000…, the declared data/twin.ref {declared['ref'][:12]}…)" in said
    assert "its src" not in said and "\n" not in said
