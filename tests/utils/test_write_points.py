"""The crash tests' write points and the start points that pause a start-up (utils/write_points.py);
tests/guarantees/test_crash_consistency.py kills the commands at every write point, and
tests/commands/test_launchers.py stops a sweep job at its start point."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from utils import write_points
from utils.write_points import start_point, write_point


def test_write_points_are_counted_and_logged(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(write_points, "_write_points", 0)
    monkeypatch.setenv("HARNESS_WRITE_LOG", str(tmp_path / "points.log"))
    write_point("written", tmp_path / "a")
    write_point("renamed", tmp_path / "b")
    lines = (tmp_path / "points.log").read_text(encoding="utf-8").splitlines()
    assert lines == [f"1\twritten\t{tmp_path / 'a'}", f"2\trenamed\t{tmp_path / 'b'}"]


def test_a_start_point_waits_until_it_is_let_go(tmp_path: Path, monkeypatch) -> None:
    """HARNESS_PAUSE_AT=NAME: the process says it reached NAME (NAME.reached) and waits there until
    NAME.go exists; every other start point passes at once."""
    monkeypatch.setenv("HARNESS_PAUSE_AT", "sweep job")
    monkeypatch.setenv("HARNESS_PAUSE_DIR", str(tmp_path))
    waits = []

    def let_go(seconds: float) -> None:  # the test, while the process waits
        assert (tmp_path / "sweep job.reached").exists()
        waits.append(seconds)
        if len(waits) == 3:
            (tmp_path / "sweep job.go").touch()

    monkeypatch.setattr(write_points, "time", SimpleNamespace(sleep=let_go))
    start_point("another point")
    assert list(tmp_path.iterdir()) == [] and waits == []
    start_point("sweep job")
    assert len(waits) == 3
