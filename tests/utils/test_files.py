"""The write guard and atomic writes (utils/files.py), unit by unit: a target is refused in one line
when it is an input, a folder, an existing file without --overwrite, or a file inside a run folder
the command does not own; an atomic write that fails leaves the earlier file and no temporary;
publishing only where nothing appeared meanwhile. (Through the real commands: tests/guarantees/.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.errors import WriteError
from utils.files import atomic_output, check_target, publish_if_absent, remove_stale_temporaries


def run_folder(path: Path) -> Path:
    """A folder that utils/run_folder.py recognises as a run: its config.yaml and checkpoints/."""
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.yaml").write_text("name: x\n")
    (path / "metrics.jsonl").write_text("")
    return path


def test_the_guard_refuses_in_one_line_naming_the_flag_and_the_fix(tmp_path: Path) -> None:
    existing = tmp_path / "out.txt"
    existing.write_text("yours")
    cases = {
        "exists; pass --overwrite": dict(path=existing),
        "is also this command's input": dict(path=existing, inputs=[existing], overwrite=True),
        "is a folder": dict(path=tmp_path),
    }
    for expected, kwargs in cases.items():
        with pytest.raises(WriteError, match=expected) as error:
            check_target(what="--output", **kwargs)
        assert str(error.value).startswith("--output ") and "\n" not in str(error.value)
    assert check_target(existing, "--output", overwrite=True) == existing.resolve()


def test_inside_a_run_folder_only_what_the_command_owns(tmp_path: Path) -> None:
    run = run_folder(tmp_path / "run")
    with pytest.raises(WriteError, match="inside the run folder"):
        check_target(run / "notes.txt", "--output")
    own = check_target(run / "checkpoints" / "averaged_last2.pt", "--output", own=("checkpoints/averaged_*.pt",))
    assert own == (run / "checkpoints" / "averaged_last2.pt").resolve()


def test_a_failed_atomic_write_leaves_the_earlier_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "scores.json"
    target.write_text("earlier")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as f:
            f.write("half")
            raise RuntimeError("killed in the middle")
    assert target.read_text() == "earlier" and [p.name for p in tmp_path.iterdir()] == ["scores.json"]
    with atomic_output(target) as f:
        f.write("whole")
    assert target.read_text() == "whole" and remove_stale_temporaries(tmp_path) == []


def test_publishing_only_where_nothing_appeared_meanwhile(tmp_path: Path) -> None:
    tmp, target = tmp_path / ".out.tmp", tmp_path / "out.txt"
    tmp.write_text("first")
    publish_if_absent(tmp, target)
    assert target.read_text() == "first" and not tmp.exists()
    tmp.write_text("second")
    with pytest.raises(WriteError, match="appeared while this command ran"):
        publish_if_absent(tmp, target)
    assert target.read_text() == "first" and not tmp.exists()
