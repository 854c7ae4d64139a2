"""Two commands at once (issue 58), through the real entry points, made deterministic by acting at
a command's own write point (utils/write_points.py) instead of sleeping: a second
inference.py that checked --output at the same time never replaces the first one's file, and
test.py holds the run's lock from before it reads the checkpoint until its scores are published,
so a train.py started meanwhile cannot rotate that checkpoint away under it."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import one_error_line
from in_process import run_in_process

import utils.files
import utils.publish
import utils.write_points
from utils.run_folder import RunLock


def test_a_second_inference_never_replaces_the_first_ones_output(trained_run: Path, tmp_path: Path, monkeypatch):
    source, out = tmp_path / "source.txt", tmp_path / "out.txt"
    source.write_text("Bonjour .\n")

    def another_command_publishes_first(what: str, path: Path) -> None:
        if what == "written" and not out.exists():  # both checked that out.txt was absent
            out.write_text("the other command's translations\n")

    monkeypatch.setattr(utils.files, "write_point", another_command_publishes_first)
    proc = run_in_process(["inference.py", "--run", str(trained_run), "--src", str(source), "--output", str(out)])
    assert "appeared while this command ran (another command wrote it)" in one_error_line(proc)
    assert out.read_text() == "the other command's translations\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # its temporary removed
    monkeypatch.undo()
    proc = run_in_process(["inference.py", "--run", str(trained_run), "--src", str(source), "--output", str(out)])
    assert proc.returncode == 2 and "exists; pass --overwrite" in one_error_line(proc)  # (checked first, as ever)


def test_test_py_holds_the_runs_lock_from_reading_its_checkpoint_to_publishing(
    trained_run: Path, tmp_path: Path, monkeypatch
):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    shutil.rmtree(run / "test", ignore_errors=True)
    held = []
    import artifacts.lookup

    resolve = artifacts.lookup.read_from_run

    def reading(run_dir: Path):  # the moment test.py reads the run's best checkpoint
        held.append(RunLock.recorded_holder(run_dir))
        return resolve(run_dir)

    monkeypatch.setattr(artifacts.lookup, "read_from_run", reading)
    published = []
    write_point = utils.write_points.write_point

    def publishing(what: str, path: Path) -> None:
        if what == "published":
            published.append(RunLock.recorded_holder(run))
        write_point(what, path)

    monkeypatch.setattr(utils.publish, "write_point", publishing)
    proc = run_in_process(["test.py", "--run", str(run)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert held and all(h and "test.py" in h for h in held), held  # locked before the checkpoint is read
    assert published and all(h and "test.py" in h for h in published), published
