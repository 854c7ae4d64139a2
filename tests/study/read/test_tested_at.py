"""Issue 77: a test records the code it was scored at (scores.json's `tested_at`: the commit, tree state and
code fingerprint, as a training session records its own), and a declared row is worded only when every
recorded test commit qualifies as the training commits do (study/read/declared.py). Through the real
commands on tiny runs in a scratch git repository: trained and tested at the commit that declared the
family, the row is worded; one run re-tested at a commit where the family read otherwise (changed, then
changed back), the row has no verdict and the page says the test is why; a test that records no commit
(as every archived run's) keeps the verdict and the provenance page says it was not recorded."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, tiny_overrides, with_sets
from in_process import run_in_process

from study.read import declared
from utils import provenance

FAMILY = """baseline: sinusoidal
rule: beyond_tie
headline:
  - {table: test, compared_on: test set}
equivalence: {sacreBLEU: 50.0}
"""
SEEDS = (1, 2)
WHY = "descriptive: not every run of it was tested at a commit that declared the family"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def score(run: Path, *flags: str) -> None:
    proc = run_in_process(["test.py", "--run", str(run), "--set", "evaluation.teacher_forced=false", *flags])
    assert proc.returncode == 0, proc.stderr[-2000:]


def compare(runs: list[Path], family: Path, out: Path) -> tuple[dict, str, str]:
    """The declared row of compare.py's findings, its headline and provenance pages."""
    args = [*map(str, runs), "--family", str(family), "--bootstrap_samples", "200", "--output", str(out)]
    proc = run_in_process(["compare.py", *args, "--overwrite"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    tables = json.loads(Path(f"{out}_findings.json").read_text())["tables"]
    (row,) = [r for t in tables for r in t["rows"] if r["declared"]]
    return row, Path(f"{out}_headline.md").read_text(), Path(f"{out}_provenance.md").read_text()


@pytest.mark.slow
def test_a_test_at_a_commit_that_did_not_declare_the_family_gets_no_verdict(tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "repo"
    family = repo / "configs" / "tiny" / "findings" / "headline.yaml"
    family.parent.mkdir(parents=True)
    family.write_text(FAMILY)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@t")
    git(repo, "config", "user.name", "t")
    declaring = commit(repo, "the family")
    # the code both commands record, and the checkout the family is read from: the scratch repository
    monkeypatch.setattr(provenance, "ROOT", repo)
    monkeypatch.setattr(declared, "ROOT", repo)
    monkeypatch.setattr(declared, "_DECLARATIONS", {})

    runs = []
    for encoding in ("sinusoidal", "rope"):
        for seed in SEEDS:
            run = tmp_path / f"{encoding}_seed{seed}"
            sets = with_sets(
                tiny_overrides(run, tmp_path / "cache", steps=2), "training.bleu_sentences=0", f"seed={seed}"
            )
            proc = run_in_process(["train.py", "--config", f"configs/demo/{encoding}.yaml", *sets])
            assert proc.returncode == 0, proc.stderr[-2000:]
            score(run)
            runs.append(run)
    rope = tmp_path / "rope_seed1"
    tested_at = json.loads((rope / "test" / "scores.json").read_text())["tested_at"]
    assert tested_at["commit"] == declaring and tested_at["uncommitted_changes"] is False
    assert tested_at["code_fingerprint"] == provenance.code_fingerprint()

    summary = tmp_path / "summary"
    row, headline, page = compare(runs, family, summary)
    assert row["outcome"] not in ("withheld", "descriptive") and "tested_at_declaring_commit" not in row
    assert WHY not in headline and f"tested at: {declaring[:12]} (4 tests)." in page

    # the family edited (then restored): the run re-tested in between was scored where it read otherwise
    family.write_text(FAMILY.replace("50.0", "0.5"))
    elsewhere = commit(repo, "the family edited")
    score(rope, "--overwrite")
    family.write_text(FAMILY)
    commit(repo, "the family restored")
    row, headline, page = compare(runs, family, summary)
    assert row["config"] == "demo/rope" and row["from_declaring_commit"] and row["tested_at_declaring_commit"] is False
    assert row["outcome"] == "withheld" and row["finding"].startswith(WHY) and WHY in headline
    assert f"tested at: {declaring[:12]} (3 tests); {elsewhere[:12]} (1 test)." in page
    assert "test commit not recorded" not in page

    # a test that records no commit (scored before test.py recorded it): not held against the row, said
    scores = json.loads((rope / "test" / "scores.json").read_text())
    del scores["tested_at"]
    (rope / "test" / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    row, headline, page = compare(runs, family, summary)
    assert row["outcome"] not in ("withheld", "descriptive") and WHY not in headline
    assert "test commit not recorded: `demo/rope` seed 1 (scored before test.py recorded it in scores.json)." in page


def test_the_provenance_page_lists_resumed_sessions_and_tests_without_a_commit() -> None:
    """An archived run stopped at step 21 and resumed (two sessions in its provenance.json), tested
    before test.py recorded the commit: the provenance page compare.py writes of it says both, once."""
    from study.run import judge_study

    study = ROOT / "results" / "demo_confirm"
    runs = [str(study / name) for name in ("sinusoidal_seed109", "sinusoidal_seed110")]
    page = judge_study(runs, significance=False).pages()["_provenance.md"]
    resumed = (
        "resumed (training stopped, then continued from a checkpoint): `demo_confirm/sinusoidal` seed 109 at step 21."
    )
    assert resumed in page
    assert page.count("test commit not recorded: every run (scored before test.py recorded it in scores.json).") == 1
