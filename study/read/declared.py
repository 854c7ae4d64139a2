"""Declared before the runs, as recorded: a study's family file must stand, as it is now, in the commit
every run of it was trained from (provenance.json records each training session's commit:
utils/provenance.py) and in the commit its test was scored at, where the test records one (scores.json's
`tested_at`, since issue 77; a test scored before records none and is not held against its run). A
commit qualifies when `git show <commit>:<family file>` parses to the same declaration (a corrected
comment does not undo it) and the code had no uncommitted changes; a run without that proof marks its
comparisons descriptive (study/judge/verdicts.py), its page saying whether training or testing lacks it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import yaml

from utils.provenance import ROOT, git_output, read_provenance

if TYPE_CHECKING:  # (an annotation only: tools/study_ready.py reads a family without torch)
    from study.records import Configuration

_DECLARATIONS: dict[tuple[str, str], object] = {}  # (commit, path) -> the family as it read then


def _declaration_at(commit: str, relative: str) -> Optional[object]:
    """The family file as it read in `commit`, parsed (None: git could not show it; not remembered,
    so a slow or failed git call is asked again)."""
    key = (commit, relative)
    if key not in _DECLARATIONS:
        text = git_output("show", f"{commit}:{relative}")
        if text is None:
            return None
        try:
            _DECLARATIONS[key] = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
    return _DECLARATIONS[key]


def _now(family_path: str) -> object:
    return yaml.safe_load(Path(family_path).read_text(encoding="utf-8"))


def stood_in(commit: Optional[str], family_path: str, now: Optional[object] = None) -> bool:
    """Whether the family file read in `commit` as it reads now (`now`: parsed once by a caller that
    checks many runs)."""
    try:
        relative = Path(family_path).resolve().relative_to(ROOT).as_posix()
    except ValueError:  # not in this checkout
        return False
    then = _declaration_at(commit, relative) if commit else None
    return then is not None and then == (_now(family_path) if now is None else now)


def qualifies(
    commit: Optional[str], uncommitted_changes: Optional[bool], family_path: str, now: Optional[object] = None
) -> bool:
    """Whether code at `commit`, unchanged, held the family as it reads now (a training session's, a test's)."""
    return uncommitted_changes is False and stood_in(commit, family_path, now)


def run_declared(run_dir: Path, family_path: str, now: Optional[object] = None) -> bool:
    """Whether every session of the run was trained, unchanged, from a commit holding the family."""
    sessions = (read_provenance(run_dir) or {}).get("sessions") or []
    return bool(sessions) and all(
        qualifies(s.get("commit"), s.get("uncommitted_changes"), family_path, now) for s in sessions
    )


def declaring_runs(groups: Sequence[Configuration], family_path: Optional[str]) -> Optional[frozenset[str]]:
    """The run folders trained from a commit that declared the family; None without a family file."""
    if family_path is None:
        return None
    now = _now(family_path)
    return frozenset(r.run for g in groups for r in g.runs if run_declared(Path(r.run), family_path, now))


def tests_off_declaring_commit(groups: Sequence[Configuration], family_path: Optional[str]) -> frozenset[str]:
    """The test folders whose scores.json records a commit (or tree) that did not declare the family
    (none without a family file; a test that records none is not among them)."""
    if family_path is None:
        return frozenset()
    now = _now(family_path)
    tested = [r for g in groups for r in g.runs if r.tested_at is not None]
    return frozenset(
        r.test_dir
        for r in tested
        if not qualifies(r.tested_at.commit, r.tested_at.uncommitted_changes, family_path, now)
    )
