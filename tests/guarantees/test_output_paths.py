"""One output-path rule for every command: a target is resolved through
links, never a device, FIFO, socket or kernel file, never a folder when a file is expected; every
file compare.py writes (plots included) passes the same --overwrite guard, which replaces only what
the harness recorded writing and nobody edited since; train.py --overwrite never deletes a user's
file inside the run's own folders. Each case goes through the real entry point."""

from __future__ import annotations

import os
import shutil
import socket
import stat
from pathlib import Path

import pytest
from helpers import one_error_line, snapshot, train
from in_process import run_in_process as run


@pytest.fixture(scope="module")
def summary_runs(trained_run: Path) -> list[str]:
    return ["compare.py", str(trained_run), "--no_significance"]


def heatmap(output: str | Path, *flags: str):
    """visualize.py's cheapest plot (no model): a single-file --output through the shared guard."""
    return run(["visualize.py", "pe-heatmap", "--output", str(output), *flags])


# ---- 1, 2. compare.py: every file of the prefix guarded; --overwrite replaces only its own, unedited


def test_an_edited_report_is_the_users_and_overwrite_refuses_it(summary_runs: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "summary"
    assert run([*summary_runs, "--output", str(prefix)]).returncode == 0
    assert run([*summary_runs, "--output", str(prefix), "--overwrite"]).returncode == 0  # its own: replaced
    report = tmp_path / "summary.md"
    report.write_text(report.read_text() + "\nMy reading of these numbers.\n")
    before = snapshot(tmp_path)
    message = one_error_line(run([*summary_runs, "--output", str(prefix), "--overwrite"]))
    assert f"--output {report} was edited since compare.py wrote it: move it away" in message, message
    assert snapshot(tmp_path) == before  # refused before anything was written


def test_a_plot_of_the_users_at_the_prefix_is_never_replaced(summary_runs: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "summary"
    mine = tmp_path / "summary_bleu.png"
    mine.write_bytes(b"a picture of mine")
    assert "exists; pass --overwrite" in one_error_line(run([*summary_runs, "--output", str(prefix)]))
    message = one_error_line(run([*summary_runs, "--output", str(prefix), "--overwrite"]))
    assert f"{mine} exists and was not written by compare.py" in message, message
    written = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".summary.lock"))  # (the set's lock)
    assert mine.read_bytes() == b"a picture of mine" and written == [mine.name]


def test_overwrite_removes_its_own_outputs_this_summary_no_longer_has(trained_run: Path, tmp_path: Path) -> None:
    """Findings written by an earlier compare.py, then a summary without them: left, they would pass
    for this summary's; compare.py's own, unedited, are removed (a user's is refused, above)."""
    prefix = tmp_path / "summary"
    assert run(["compare.py", str(trained_run), "--bootstrap_samples", "10", "--output", str(prefix)]).returncode == 0
    findings = [tmp_path / "summary_findings.md", tmp_path / "summary_findings.json", tmp_path / "summary_headline.md"]
    assert all(p.is_file() for p in findings)
    proc = run(["compare.py", str(trained_run), "--no_significance", "--output", str(prefix), "--overwrite"])
    assert proc.returncode == 0 and f"removed {findings[0]}" in proc.stdout, proc.stderr
    assert not any(p.exists() for p in findings) and (tmp_path / "summary.md").is_file()


def test_compare_output_that_is_a_folder_is_refused(summary_runs: list[str], tmp_path: Path) -> None:
    for output in (f"{tmp_path / 'new'}/", str(tmp_path)):  # a trailing slash; an existing folder
        message = one_error_line(run([*summary_runs, "--output", output]))
        assert f"--output {output} is a folder; give a file name" in message, message
    assert list(tmp_path.iterdir()) == []


# ---- 3. never a device, FIFO, socket or kernel file


def test_a_fifo_socket_or_device_is_never_replaced_by_a_file(tmp_path: Path) -> None:
    fifo, sock, device = tmp_path / "fifo", tmp_path / "sock", tmp_path / "null"
    os.mkfifo(fifo)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    targets = {fifo: "a named pipe (FIFO)", sock: "a socket"}
    if os.geteuid() == 0:  # a character device of our own (as /dev/null), replaceable here as root
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        targets[device] = "a character device"
    try:
        for target, kind in targets.items():
            message = one_error_line(heatmap(target, "--overwrite"))
            assert f"--output {target} is {kind}" in message and "not a regular file" in message, message
            assert not target.is_file() and target.exists()
    finally:
        listener.close()


def test_a_kernel_file_is_not_an_output(tmp_path: Path) -> None:
    for target in ("/proc/self/harness_plot.png", "/sys/harness_plot.png"):
        message = one_error_line(heatmap(target, "--overwrite"))
        assert f"--output {target} is a file of the kernel" in message, message


# ---- 5. a link is written through; a dangling one is named


def test_a_link_is_written_through_and_a_dangling_one_refused(tmp_path: Path) -> None:
    real, link = tmp_path / "real.png", tmp_path / "link.png"
    real.write_bytes(b"an earlier plot")
    link.symlink_to(real)
    assert heatmap(link, "--overwrite").returncode == 0
    assert link.is_symlink() and real.read_bytes().startswith(b"\x89PNG")  # the link kept, its file replaced
    dangling, nowhere = tmp_path / "dangling.png", tmp_path / "gone" / "plot.png"
    dangling.symlink_to(nowhere)
    message = one_error_line(heatmap(dangling, "--overwrite"))
    assert f"--output {dangling} is a link to {nowhere}, which does not exist" in message, message
    assert dangling.is_symlink() and not nowhere.parent.exists()


# ---- 6. a folder where a file is expected, a file where a folder is


def test_a_folder_given_for_a_file_and_a_file_for_a_folder(trained_run: Path, tmp_path: Path) -> None:
    for output in (f"{tmp_path / 'plots'}/", str(tmp_path)):
        message = one_error_line(heatmap(output))
        assert f"--output {output} is a folder; give a file name" in message, message
    assert list(tmp_path.iterdir()) == []  # nothing created at plots
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for command in (["test.py", "--run", str(trained_run)], ["export.py", "--run", str(trained_run)]):
        message = one_error_line(run([*command, "--output", str(notes)]))
        assert f"--output {notes} is a file, not a folder" in message, message
    assert notes.read_text() == "mine"


# ---- 4. train.py --overwrite deletes only a run folder holding nothing but the harness's files


@pytest.fixture(scope="module")
def tested_run(trained_run: Path) -> Path:
    """The trained run with what test.py (k-inputs included) and average.py write into it."""
    assert run(["test.py", "--run", str(trained_run), "--concat", "1", "2"]).returncode == 0
    assert run(["average.py", "--run", str(trained_run), "--average_last", "1"]).returncode == 0
    return trained_run


def test_only_the_harness_files_are_recognised_as_its_own(tested_run: Path) -> None:
    from settings.config import is_written_config
    from utils.run_folder import RunFolder

    written = {p.relative_to(tested_run).parts[0] for p in tested_run.rglob("*")}
    assert {"checkpoints", "tb", "test"} <= written and any((tested_run / "test" / "concat").iterdir())
    assert any(tested_run.glob("checkpoints/averaged_*.pt")) and any(tested_run.glob("tb/events.out.tfevents.*"))
    folder = RunFolder.inspect(tested_run, is_written_config)
    assert (folder.state, folder.users_files) == ("trained", ())


@pytest.mark.parametrize("mine", ["checkpoints/notes.txt", "checkpoints/my_average.pt", "test/concat/k2/mine.txt"])
def test_overwrite_refuses_a_run_holding_a_users_file_inside(tested_run: Path, tmp_path: Path, mine: str) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tested_run, run_dir)
    (run_dir / mine).write_text("mine")
    before = snapshot(run_dir)
    message = one_error_line(train(run_dir, tmp_path / "cache", flags=("--overwrite",)))
    assert "--overwrite refused" in message and f"({mine})" in message and "nothing was deleted" in message
    assert snapshot(run_dir) == before


def test_a_users_file_named_tmp_is_not_a_temporary(trained_run: Path, tmp_path: Path) -> None:
    """Only tempfile's own names (tmp + 8 of [a-z0-9_]) are Ignite's temporaries: a user's
    checkpoints/tmp_backup.pt is neither deleted at start nor taken for the harness's by --overwrite."""
    from utils.files import remove_stale_temporaries
    from utils.run_folder import users_files_inside

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    mine, ignites = run_dir / "checkpoints" / "tmp_backup.pt", run_dir / "checkpoints" / "tmpab_12cd3"
    mine.write_bytes(b"hand-averaged")
    ignites.write_bytes(b"partial")
    assert [str(p) for p in users_files_inside(run_dir)] == ["checkpoints/tmp_backup.pt"]
    assert remove_stale_temporaries(run_dir / "checkpoints") == [ignites]
    assert mine.read_bytes() == b"hand-averaged"
