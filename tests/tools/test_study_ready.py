"""The study runner's refusals (tools/study_runs.sh, tools/study_ready.py), each one line and exit 2
before it trains anything: bad arguments, a second runner of the study, git's lock held, a commit
without the study, a family that reads otherwise than in the commit, uncommitted code (the summary is
computed and committed with this checkout's code; the runner's own generated blocks do not count).
On a clone of one copy of the project holding the tiny study of tests/tools/test_study_runs.py."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools.test_study_runs import GIT_ENV, STUDY, project_copy

FAMILY_FILE = f"configs/{STUDY}/findings/headline.yaml"


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, str]:
    where = tmp_path_factory.mktemp("study_ready")
    return project_copy(where, where / "cache")


@pytest.fixture
def repo(original, tmp_path: Path) -> Path:
    """A clone of the copy (the same commit), alone in tmp_path (the runner writes beside it)."""
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(original[0]), str(clone)], check=True)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    return clone


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def refused(repo: Path, *args: str) -> str:
    """The one line the runner refuses with; nothing was started (no worktree, no log)."""
    done = subprocess.run(
        ["bash", "tools/study_runs.sh", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: study_runs.sh: "), done.stderr
    started = [p for p in repo.parent.glob("study_*") if p.is_dir() or p.suffix == ".log"]  # a worktree, a log
    assert not started, started
    return lines[0]


def test_bad_arguments_are_one_line(repo: Path, original) -> None:
    commit = original[1]
    assert "got 3 argument(s)" in refused(repo, STUDY, commit, "1")
    assert "COMMIT 'nope'" in refused(repo, STUDY, "nope", "1", "tomorrow")
    assert "WORKERS '0'" in refused(repo, STUDY, commit, "0", "tomorrow")
    assert "WORKERS 'two'" in refused(repo, STUDY, commit, "two", "tomorrow")
    assert "DEADLINE 'half past'" in refused(repo, STUDY, commit, "1", "half past")
    assert "is already past" in refused(repo, STUDY, commit, "1", "yesterday")
    assert "configs/no_such/findings/headline.yaml: no such family" in refused(repo, "no_such", commit, "1", "tomorrow")


def test_uncommitted_code_is_refused(repo: Path, original) -> None:
    commit = original[1]
    with open(repo / "study" / "read" / "family.py", "a") as f:
        f.write("# an edit\n")
    assert "uncommitted changes in study/read/family.py:" in refused(repo, STUDY, commit, "1", "tomorrow")
    git(repo, "checkout", "study/read/family.py")
    with open(repo / "README.md", "a") as f:  # it would be committed with the pages it renders
        f.write("WIP\n")
    assert "uncommitted changes in README.md:" in refused(repo, STUDY, commit, "1", "tomorrow")
    assert (repo / "README.md").read_text().endswith("WIP\n")  # left as it was
    git(repo, "checkout", "README.md")
    # a generated block's body changed: what the runner's render writes, not a hand edit (a kill
    # between its render and its commit leaves it so)
    text = (repo / "README.md").read_text()
    start = text.index("\n", text.index("<!-- generated from results/demo/summary_findings.json")) + 1
    (repo / "README.md").write_text(text[:start] + "a number\n" + text[start:])
    ready = subprocess.run([sys.executable, "tools/study_ready.py", STUDY, commit], cwd=repo, capture_output=True)
    assert ready.returncode == 0, ready.stderr


def test_a_family_unlike_the_commits_is_refused(repo: Path, original) -> None:
    commit = original[1]
    family = repo / FAMILY_FILE
    text = family.read_text()
    family.write_text(text.replace("looks: [2, 3]", "looks: [3]"))  # edited, not committed
    unlike = f"{FAMILY_FILE} reads otherwise than in commit {commit[:12]}"
    assert unlike in refused(repo, STUDY, commit, "1", "now +1 hour")
    git(repo, "commit", "-q", "-am", "another plan")  # committed after the runs' commit
    assert unlike in refused(repo, STUDY, commit, "1", "tomorrow")
    family.write_text("# a comment\n" + text)  # read parsed, as study/read/declared.py reads it: the same family
    git(repo, "commit", "-q", "-am", "a comment")
    ready = subprocess.run([sys.executable, "tools/study_ready.py", STUDY, commit], cwd=repo, capture_output=True)
    assert ready.returncode == 0, ready.stderr


def test_a_commit_without_the_study_is_refused(repo: Path, original) -> None:
    git(repo, "rm", "-q", "-r", f"configs/{STUDY}")
    git(repo, "commit", "-q", "-m", "no study")
    without = git(repo, "rev-parse", "HEAD")
    git(repo, "revert", "--no-edit", "HEAD")  # the study back here, but not in that commit
    line = refused(repo, STUDY, without, "1", "tomorrow")
    assert f"commit {without[:12]} holds no {FAMILY_FILE}" in line


def test_a_second_runner_of_a_study_is_refused(repo: Path, original) -> None:
    lock = repo.parent / f".study_{STUDY}.lock"
    stop = repo.parent / f"study_{STUDY}.stop"
    stop.write_text("")  # asked of the running one: the refused one leaves it
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running runner (or a run it started) holds it
        line = refused(repo, STUDY, original[1], "1", "tomorrow")
    assert f"running {STUDY}: it holds {lock}" in line and stop.exists()


def test_gits_lock_is_named(repo: Path, original) -> None:
    (repo / ".git" / "index.lock").write_text("")  # a git command killed while it held it
    line = refused(repo, STUDY, original[1], "1", "tomorrow")
    assert f"{repo / '.git' / 'index.lock'} exists: a git command is running in this checkout" in line
