"""Declared before, provably (study/read/declared.py), checked on the archive: every archived run that
records the commit it was trained from was trained from a commit in which its study's family file
stood as it is now; the committed findings keep the rows of runs without that proof descriptive; no
page says a family was "declared before" its runs while a run of it lacks the proof; a study's runs
keep the device kind and precision its family plans; and the variant test folders the pages name
exist. The proof itself is checked on a scratch git repository (it fails for a run trained before
the family was committed, for an edited family, for a changed tree)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from study.read import declared
from study.read.family import load_family
from utils.provenance import read_provenance

ROOT = Path(__file__).resolve().parents[3]
FAMILIES = sorted(ROOT.glob("configs/**/findings/headline.yaml"))


def study_of(family_file: Path) -> str:
    """configs/<study>/findings/headline.yaml -> <study> (results/<study>/ holds its runs), e.g. report/trio."""
    return family_file.parents[1].relative_to(ROOT / "configs").as_posix()


def study_runs(family_file: Path) -> list[tuple[Path, str]]:
    """(run folder, config label) of every archived run of the family's configurations."""
    study = study_of(family_file)
    family = load_family(str(family_file))
    named = [h.configs for h in family.headline]
    wanted = None if any(c is None for c in named) else {c for cs in named for c in cs}
    out = []
    for config in sorted((ROOT / "results" / study).glob("*/config.yaml")):
        label = yaml.safe_load(config.read_text(encoding="utf-8"))["name"]
        if wanted is None or label in wanted or label == f"{study}/{family.baseline}":
            out.append((config.parent, label))
    return out


def recorded(run: Path) -> bool:
    return any(s.get("commit") for s in (read_provenance(run) or {}).get("sessions") or [])


@pytest.mark.parametrize("family_file", FAMILIES, ids=study_of)
def test_every_recorded_commit_holds_the_family(family_file):
    runs = study_runs(family_file)  # none yet: a study declared before its first run
    with_commit = [run for run, _ in runs if recorded(run)]
    for run in with_commit:
        for s in read_provenance(run)["sessions"]:  # a shallow clone lacks the history this reads
            have = subprocess.run(["git", "cat-file", "-e", f"{s['commit']}^{{commit}}"], cwd=ROOT, capture_output=True)
            assert have.returncode == 0, (
                f"{run.name}: commit {s['commit'][:12]} is not in this clone (a shallow clone?)"
            )
        assert declared.run_declared(run, str(family_file)), (
            f"{run.relative_to(ROOT)} was trained from a commit where {family_file.relative_to(ROOT)} did not "
            f"stand as it is now"
        )


@pytest.mark.parametrize("family_file", FAMILIES, ids=study_of)
def test_runs_keep_the_planned_device_and_precision(family_file):
    family = load_family(str(family_file))
    for run, _ in study_runs(family_file):
        if not recorded(run):
            continue
        for s in read_provenance(run)["sessions"]:
            assert (s["device_kind"], s["precision"]) == (family.device, family.precision), run


def committed_findings(study: str, family_file: Path) -> list[dict]:
    out = []
    for path in sorted((ROOT / "results" / study).glob("*_findings.json")):
        findings = json.loads(path.read_text(encoding="utf-8"))
        if findings.get("family") == str(family_file.relative_to(ROOT)):
            out.append(findings)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("family_file", FAMILIES, ids=study_of)
def test_rows_of_runs_without_the_proof_are_descriptive(family_file):
    study = study_of(family_file)
    proof = {label: True for _, label in study_runs(family_file)}
    for run, label in study_runs(family_file):
        proof[label] = proof[label] and declared.run_declared(run, str(family_file))
    family = load_family(str(family_file))
    baseline = f"{study}/{family.baseline}"
    found = committed_findings(study, family_file)
    assert found or not proof, f"results/{study} has no findings made with {family_file.relative_to(ROOT)}"
    for findings in found:
        for table in findings["tables"]:
            for r in table["rows"]:
                if not r.get("declared") or r.get("mean_difference") is None:
                    continue
                # the committed flag is what the runs say (every seed of the row: all runs of both configs)
                if r["from_declaring_commit"]:
                    assert proof[r["config"]] and proof[baseline], (r["config"], r["compared_on"])
                if not r["from_declaring_commit"]:
                    assert r["outcome"] == "withheld" or findings.get("interim"), (r["config"], r["compared_on"])


def pages_of(study: str) -> list[Path]:
    return [
        *sorted((ROOT / "results" / study).glob("*.md")),
        *sorted((ROOT / "configs" / study / "findings").glob("*.yaml")),
    ]


@pytest.mark.parametrize("family_file", FAMILIES, ids=study_of)
def test_no_page_says_declared_before_without_the_proof(family_file):
    study = study_of(family_file)
    unproven = [run for run, _ in study_runs(family_file) if not declared.run_declared(run, str(family_file))]
    if not unproven:
        return
    for page in pages_of(study):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"declared\s+before", text), (
            f"{page.relative_to(ROOT)} says 'declared before' but {unproven[0].relative_to(ROOT)} was not "
            f"trained from a commit holding {family_file.relative_to(ROOT)}"
        )


def test_the_variant_folders_the_pages_name_exist():
    pages = sorted(ROOT.glob("results/**/README.md"))
    named = 0
    for page in pages:
        for name in set(re.findall(r"`(test_[a-z]+\d+)/`", page.read_text(encoding="utf-8"))):
            named += 1
            study = page.parent if page.parent != ROOT / "results" else ROOT / "results"
            assert any(study.rglob(name)), f"{page.relative_to(ROOT)} names {name}/, which no archived run holds"
    assert named, "the pages name the RoPE scaling folders"


# ----------------------------------------------------------------------------- the proof itself


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_the_proof_fails_for_an_edited_family_a_later_commit_or_a_changed_tree(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@t")
    git(repo, "config", "user.name", "t")
    family = repo / "configs" / "headline.yaml"
    (repo / "other.txt").write_text("x\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "before the family")
    before = git(repo, "rev-parse", "HEAD")
    family.write_text("# a comment\nbaseline: sinusoidal\nheadline: [{table: test}]\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "the family")
    at = git(repo, "rev-parse", "HEAD")
    monkeypatch.setattr(declared, "ROOT", repo)
    monkeypatch.setattr(declared, "git_output", lambda *a: _git_in(repo, *a))
    declared._DECLARATIONS.clear()

    made = []

    def run_from(commit, changed=False):
        run = tmp_path / f"run{len(made)}"
        made.append(run)
        run.mkdir()
        sessions = [{"commit": commit, "uncommitted_changes": changed}]
        (run / "provenance.json").write_text(json.dumps({"sessions": sessions}))
        return run

    assert declared.run_declared(run_from(at), str(family))
    assert not declared.run_declared(run_from(before), str(family))  # trained before the family existed
    assert not declared.run_declared(run_from(at, changed=True), str(family))  # from a changed tree
    assert not declared.run_declared(tmp_path, str(family))  # no provenance
    family.write_text("# the comment corrected\nbaseline: sinusoidal\nheadline: [{table: test}]\n")
    assert declared.run_declared(run_from(at), str(family))  # a comment is not the declaration
    family.write_text("baseline: rope\nheadline: [{table: test}]\n")
    assert not declared.run_declared(run_from(at), str(family))  # the declaration changed since
    declared._DECLARATIONS.clear()


def _git_in(repo: Path, *args: str):
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True)
    return done.stdout if done.returncode == 0 else None


def test_a_family_whose_baseline_has_no_run_yet_is_interim_not_an_error(capsys) -> None:
    """A study that has just begun (its declared baseline not trained yet): compare.py says so in a
    note, compares with the default, and words no finding (interim), instead of refusing."""
    from commands import compare
    from commands.cli import main_guard

    runs = [str(ROOT / "results" / "demo" / name) for name in ("rope", "learnable")]
    family = "configs/demo/findings/headline.yaml"
    assert main_guard(compare.main, [*runs, "--family", family, "--bootstrap_samples", "100"]) == 0
    captured = capsys.readouterr()
    assert f"note: {family} declares the baseline sinusoidal, which has no run among these yet" in captured.err
    assert "Interim" in captured.out and "ahead" not in captured.out.split("Interim", 1)[1].split("\n")[0]
