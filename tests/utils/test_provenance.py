"""What made a run (utils/provenance.py): train.py records each session's code, libraries and machine
in provenance.json; compare.py keeps seeds of different device kinds or precisions out of one row
unless --mixed names it, and marks a row whose seeds span code versions or devices."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import ROOT, one_error_line, train
from in_process import run_in_process

from utils.provenance import code_fingerprint

FIELDS = {
    "started",
    "ended",
    "resume",
    "step_started",
    "step_ended",
    "finished",
    "command",
    "commit",
    "uncommitted_changes",
    "diff_sha256",
    "code_fingerprint",
    "torch",
    "cuda",
    "ctranslate2",
    "device_kind",
    "device",
    "precision",
    "world_size",
}


def test_a_fresh_run_records_every_field_and_each_resume(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert train(run, tmp_path / "cache", steps=2).returncode == 0
    sessions = json.loads((run / "provenance.json").read_text())["sessions"]
    assert len(sessions) == 1 and set(sessions[0]) == FIELDS
    first = sessions[0]
    assert first["device_kind"] == "cpu" and first["precision"] == "fp32" and first["world_size"] == 1
    assert first["code_fingerprint"] == code_fingerprint() and len(first["commit"]) == 40
    assert first["finished"] is True and first["step_ended"] == 2 and first["command"][0] == "train.py"
    assert train(run, tmp_path / "cache", "training.max_steps=4", steps=2, flags=("--resume",)).returncode == 0
    sessions = json.loads((run / "provenance.json").read_text())["sessions"]
    assert [s["resume"] for s in sessions] == [False, True] and sessions[1]["step_started"] == 2


def test_the_fingerprint_ignores_results_and_runs_but_not_code(tmp_path: Path) -> None:
    files = ["utils/provenance.py", "README.md"]
    assert code_fingerprint(files) == code_fingerprint(files)
    assert code_fingerprint(files) != code_fingerprint(["utils/provenance.py"])


@pytest.fixture()
def two_seeds(tmp_path: Path) -> Path:
    """Two archived seeds of demo/rope (and the study's shared texts) with a recorded provenance each."""
    study = tmp_path / "demo"
    for name in ("rope", "rope_seed1", "test_sets"):
        shutil.copytree(ROOT / "results" / "demo" / name, study / name)
    return study


def set_session(run: Path, **fields) -> None:
    data = json.loads((run / "provenance.json").read_text())
    data["sessions"][-1].update(fields)
    data.pop("inferred", None)
    (run / "provenance.json").write_text(json.dumps(data))


def compare(study: Path, *flags: str):
    return run_in_process(["compare.py", str(study / "rope"), str(study / "rope_seed1"), "--no_significance", *flags])


def test_seeds_on_different_device_kinds_are_refused_without_mixed(two_seeds: Path) -> None:
    set_session(two_seeds / "rope", device_kind="cpu", device="AMD EPYC")
    set_session(two_seeds / "rope_seed1", device_kind="cuda", device="NVIDIA H100")
    refused = compare(two_seeds)
    assert "ran on different devices" in one_error_line(refused) and "--mixed device" in one_error_line(refused)
    mixed = compare(two_seeds, "--mixed", "device")
    assert mixed.returncode == 0, mixed.stderr
    assert "| demo/rope ‡ |" in mixed.stdout
    assert "‡ `demo/rope`: its seeds span devices or precisions (1: NVIDIA H100, code " in mixed.stdout


@pytest.mark.parametrize(
    "damage, says",
    [
        ('{"sessions": [', "is unreadable (not JSON text)"),
        ('{"sessions": [1, 2]}', "is not a provenance record"),
        ('["a list"]', "is not a provenance record"),
        ('{"sessions": []}', "records no session of train.py"),  # issue 75: pooled with the CUDA seed
    ],
)
def test_a_damaged_provenance_is_refused_never_read_as_unknown(two_seeds: Path, damage: str, says: str) -> None:
    """Issue 67: a damaged provenance.json was read as 'unknown', so a CUDA seed pooled with CPU seeds
    in one row (the device guard bypassed), and `"sessions": [1, 2]` was a traceback: now one line
    naming the file, exit 2."""
    set_session(two_seeds / "rope_seed1", device_kind="cuda", device="NVIDIA H100")
    (two_seeds / "rope" / "provenance.json").write_text(damage)
    proc = compare(two_seeds)
    line = one_error_line(proc)
    assert proc.returncode == 2 and f"{two_seeds / 'rope' / 'provenance.json'} {says}" in line, proc.stderr
    assert "restore it" in line and "Traceback" not in proc.stderr


def test_seeds_at_different_precisions_are_refused_without_mixed(two_seeds: Path) -> None:
    set_session(two_seeds / "rope_seed1", precision="bf16")
    assert "different precisions" in one_error_line(compare(two_seeds))
    assert compare(two_seeds, "--mixed", "precision").returncode == 0


def test_a_row_whose_seeds_span_code_versions_is_marked(two_seeds: Path) -> None:
    same = compare(two_seeds)
    assert same.returncode == 0 and "‡" not in same.stdout  # backfilled alike: one schema, one device
    set_session(two_seeds / "rope", code_fingerprint="a" * 64)
    set_session(two_seeds / "rope_seed1", code_fingerprint="b" * 64)
    marked = compare(two_seeds)
    assert marked.returncode == 0
    assert "| demo/rope ‡ |" in marked.stdout and "its seeds span code versions (1:" in marked.stdout
    assert "code aaaaaaaaaaaa" in marked.stdout and "code bbbbbbbbbbbb" in marked.stdout


def test_a_copy_without_git_records_the_snapshot_commit_and_its_own_changes(tmp_path: Path, monkeypatch) -> None:
    """A GPU machine's copy of the checkout has no .git: the runs there record the commit of the snapshot
    taken here, and a file changed since it counts as an uncommitted change (its fingerprint differs)."""
    from utils import provenance

    copy = tmp_path / "copy"
    (copy / "pkg").mkdir(parents=True)
    (copy / "pkg" / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(provenance, "ROOT", copy)
    monkeypatch.setattr(provenance, "git_output", lambda *args: {("rev-parse", "HEAD"): b"c0ffee\n"}.get(args))
    monkeypatch.setattr(provenance, "_tracked_code", lambda: ["pkg/a.py"])
    snapshot = provenance.write_snapshot()
    assert snapshot["commit"] == "c0ffee" and (copy / provenance.SNAPSHOT).is_file()
    monkeypatch.setattr(provenance, "git_output", lambda *args: None)  # the copy: no git
    state = provenance.code_state()
    assert state["commit"] == "c0ffee" and state["code_fingerprint"] == snapshot["code_fingerprint"]
    assert state["uncommitted_changes"] is False and state["code_from"] == provenance.SNAPSHOT
    (copy / "pkg" / "a.py").write_text("x = 2\n")
    changed = provenance.code_state()
    assert changed["uncommitted_changes"] is True and changed["code_fingerprint"] != snapshot["code_fingerprint"]
