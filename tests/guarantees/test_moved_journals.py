"""A journal travels with its folder (issue 75, utils/journal.py): a publication a kill left half done
in a folder moved since is finished where the folder now is, a copy's in the copy (the original
untouched), and a journal that would write outside the folder it is in (an earlier version's
absolute names, a link's target elsewhere, its staging folder left behind) is refused in one line,
writing nothing. Through the real commands killed at a write point (tests/guarantees/test_crash_consistency.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from guarantees.test_crash_consistency import TEST_ARGS, comparable, in_forked_process, published_test_set, write_points
from helpers import copy_of, one_error_line, snapshot
from in_process import run_in_process

from utils.publish import journal_file, pending_in, staging_folder


@pytest.fixture(scope="module")
def retest(trained_run: Path, tmp_path_factory) -> tuple[Path, int]:
    """A run tested once (greedy), and the write point of its re-test with --overwrite (TEST_ARGS) just
    after the first move of its publication (the new hypotheses beside the earlier scores)."""
    folder = tmp_path_factory.mktemp("moved")
    run = copy_of(trained_run, folder / "tested")
    shutil.rmtree(run / "test", ignore_errors=True)
    assert in_forked_process(["test.py", "--run", str(run), "--concat", "1", "--set", "decoding.strategy=greedy"]) == 0
    points = write_points(retest_args(copy_of(run, folder / "once")), folder / "writes.log")
    return run, next(n for n, line in enumerate(points, 1) if "\tpublished\t" in line) + 1


def retest_args(run: Path) -> list[str]:
    return ["test.py", "--run", str(run), "--overwrite", *TEST_ARGS]


def half_retested(retest: tuple[Path, int], run: Path) -> dict:
    """The tested run at `run`, its re-test killed there mid-publication; the set its journal publishes."""
    tested, kill_at = retest
    assert in_forked_process(retest_args(copy_of(tested, run)), kill_at=kill_at) == -9
    assert journal_file(run / "test").exists()
    return published_test_set(run)  # (the journal's set: what readers must see; its paths named as RUN)


def test_a_moved_run_is_finished_where_it_now_is(retest: tuple, tmp_path: Path) -> None:
    """`mv R R2; compare.py R2`: the journal's moves are done in R2 (they named R: nothing was moved,
    the journal deleted, R2/test left a mix, and the same test.py refused it), and the same test.py runs again."""
    run, moved = tmp_path / "R", tmp_path / "R2"
    new = half_retested(retest, run)
    run.rename(moved)
    proc = run_in_process(["compare.py", str(moved), "--no_significance"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"completed {moved / 'test'}" in proc.stdout
    assert comparable(moved / "test", run) == new and pending_in(moved) == [] and not run.exists()
    assert in_forked_process(retest_args(moved)) == 0  # the same command


def test_a_copied_run_is_finished_in_the_copy_and_the_original_is_untouched(retest: tuple, tmp_path: Path) -> None:
    """`cp -a R R_copy`: reading the copy finishes the copy's journal in the copy (it used to finish the
    original's, and leave the copy a mix); the original is left as the kill left it."""
    run = tmp_path / "R"
    new = half_retested(retest, run)
    before = snapshot(run)
    copy = shutil.copytree(run, tmp_path / "R_copy", symlinks=True)
    proc = run_in_process(["compare.py", str(copy), "--no_significance"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert comparable(copy / "test", run) == new and pending_in(copy) == []
    assert snapshot(run) == before  # its journal still pending, its files as the kill left them


def test_a_journal_naming_another_folder_is_refused_and_nothing_written(retest: tuple, tmp_path: Path) -> None:
    """A journal of an earlier version (absolute names) in a copy of its folder: refused in one line
    naming it, the copy and the original both untouched (it used to finish the original)."""
    run = tmp_path / "R"
    half_retested(retest, run)
    journal = journal_file(run / "test")
    plan = json.loads(journal.read_text())
    moves = [[str(run / n) for n in move] for move in plan["moves"]]
    journal.write_text(json.dumps({"moves": moves, "removes": [str(run / n) for n in plan["removes"]]}))
    before = snapshot(run)
    copy = shutil.copytree(run, tmp_path / "R_copy", symlinks=True)
    proc = run_in_process(["compare.py", str(copy), "--no_significance"])
    error = one_error_line(proc)
    assert str(journal_file(copy / "test")) in error and "earlier version" in error and f"outside {copy}" in error
    assert snapshot(run) == before and snapshot(copy) == before


def test_a_moved_export_is_finished_where_it_now_is_or_refused(trained_run: Path, tmp_path: Path) -> None:
    """An export whose export.py --overwrite was killed after its first move (old weights beside the new
    model card), moved with its journal and staging folder: inference.py finishes it in the new place
    and translates with the new export; moved without its staging folder: refused in one line (it used
    to exit 0 with the old weights beside the new README.md)."""
    out = tmp_path / "a" / "export"
    export = ["export.py", "--run", str(trained_run), "--output", str(out)]
    assert in_forked_process([*export, "--set", "decoding.strategy=greedy"]) == 0
    reference = shutil.copytree(out, tmp_path / "reference")
    points = write_points([*export[:4], str(reference), "--overwrite"], tmp_path / "writes.log")
    new = comparable(reference, trained_run)
    first_move = next(n for n, line in enumerate(points, 1) if "\tpublished\t" in line)
    assert in_forked_process([*export, "--overwrite"], kill_at=first_move) == -9
    assert comparable(out, trained_run) != new  # a mixed folder on disk
    translate = ["inference.py", "--src_text", "Bonjour.", "--model_path"]

    for name, with_staging in (("b", False), ("c", True)):
        moved = shutil.copytree(out.parent, tmp_path / name, symlinks=True) / "export"
        if not with_staging:
            shutil.rmtree(staging_folder(moved))
            before = snapshot(moved.parent)
            error = one_error_line(run_in_process([*translate, str(moved)]))
            assert str(journal_file(moved)) in error and staging_folder(moved).name in error
            assert snapshot(moved.parent) == before
            continue
        proc = run_in_process([*translate, str(moved)])
        assert proc.returncode == 0, one_error_line(proc)
        assert f"completed {moved}, which a stopped export.py" in proc.stdout + proc.stderr
        assert comparable(moved, trained_run) == new and not journal_file(moved).exists()
        assert comparable(out, trained_run) != new and journal_file(out).exists()  # the original: untouched


def test_a_moved_run_still_holds_its_test(retest: tuple, tmp_path: Path) -> None:
    """`mv R R2; test.py --run R2`: the test R2 holds is this request's (scores.json names its checkpoint
    by the path it was given, so a moved run used to ask for --overwrite); a test folder outside the run
    (--output) still needs its checkpoint's path as given."""
    tested, _ = retest
    moved = copy_of(tested, tmp_path / "R2")
    again = run_in_process(["test.py", "--run", str(moved), "--concat", "1", "--set", "decoding.strategy=greedy"])
    assert again.returncode == 0 and "already holds this test" in again.stdout, again.stderr[-2000:]
    outside = tmp_path / "outside"
    shutil.copytree(moved / "test", outside)
    elsewhere = run_in_process(
        ["test.py", "--run", str(moved), "--concat", "1", "--set", "decoding.strategy=greedy", "--output", str(outside)]
    )
    assert elsewhere.returncode == 2 and "--overwrite" in elsewhere.stderr, elsewhere.stdout
