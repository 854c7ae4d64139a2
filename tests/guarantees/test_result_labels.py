"""A result is what it is labelled (issue 58, scope 10), through the real entry points: a test of a
checkpoint other than the run's best never lands in its test/; a sweep run again with other
settings re-tests a finished run (test-time keys) or leaves it alone in one line (training keys)
instead of skipping it under the new settings' name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import one_error_line, snapshot, tiny_overrides, with_sets
from in_process import run_in_process

ROPE = "configs/demo/rope.yaml"  # the trained_run fixture's config


def test_a_checkpoint_other_than_the_best_is_tested_into_its_own_folder(trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    assert run_in_process(["test.py", "--run", str(run)]).returncode == 0
    best = snapshot(run / "test")
    last = sorted((run / "checkpoints").glob("last_*.pt"))[-1]
    proc = run_in_process(["test.py", "--model_path", str(last)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    scores = json.loads((run / f"test_{last.stem}" / "scores.json").read_text())
    assert scores["checkpoint"] == str(last)
    assert snapshot(run / "test") == best  # the run's own test is its best checkpoint's, untouched
    message = one_error_line(run_in_process(["test.py", "--model_path", str(last), "--split", "valid"]))
    assert "is not its run's best checkpoint" in message and "give --output" in message, message
    # the best checkpoint named by path is the run's own test (the same test again: nothing to redo)
    best_path = json.loads((run / "test" / "scores.json").read_text())["checkpoint"]
    proc = run_in_process(["test.py", "--model_path", best_path])
    assert proc.returncode == 0 and "already holds this test" in proc.stdout, proc.stdout


def sweep_sets(run_dir: Path, cache: Path, *extra: str) -> list[str]:
    sets = [s for s in tiny_overrides(run_dir, cache, steps=6)[1::2] if not s.startswith("run_dir=")]
    return with_sets([x for s in sets for x in ("--set", s)], *extra)


def test_a_sweep_with_other_settings_retests_or_leaves_a_finished_run_alone(trained_run: Path, tmp_path: Path) -> None:
    runs_root = tmp_path / "runs"
    run_dir = runs_root / "demo" / "rope"
    shutil.copytree(trained_run, run_dir)
    assert run_in_process(["test.py", "--run", str(run_dir)]).returncode == 0
    cache = tmp_path / "cache"
    sweep = ["sweep.py", ROPE, "--runs_root", str(runs_root)]
    proc = run_in_process([*sweep, *sweep_sets(run_dir, cache)])  # as it was trained and tested: skipped
    assert proc.returncode == 0 and "is finished" in proc.stdout, proc.stdout[-2000:]
    # another search: the finished run is tested again with it, not skipped under its name
    proc = run_in_process([*sweep, *sweep_sets(run_dir, cache, "decoding.strategy=greedy")])
    assert proc.returncode == 0 and "scored with other test-time settings" in proc.stdout, proc.stdout[-2000:]
    assert "decoding.strategy: 'beam' -> 'greedy'" in proc.stdout
    assert json.loads((run_dir / "test" / "scores.json").read_text())["decoding"]["strategy"] == "greedy"
    # a smaller training budget (a training key): the run trained to 6 steps is not this sweep's 4-step run
    before = snapshot(run_dir)
    proc = run_in_process([*sweep, *sweep_sets(run_dir, cache, "decoding.strategy=greedy", "training.max_steps=4")])
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert "finished training with other settings than this sweep's (training.max_steps: 6 -> 4)" in proc.stdout
    assert snapshot(run_dir) == before


def test_a_new_test_replaces_every_file_of_the_earlier_one(trained_run: Path, tmp_path: Path) -> None:
    """--overwrite with fewer outputs (no teacher-forced diagnostic, fewer k's): the earlier test's
    teacher_forced_*.tsv and concat/k2/ go as the new set is published, never left to pass for its own."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    shutil.rmtree(run / "test", ignore_errors=True)
    assert run_in_process(["test.py", "--run", str(run), "--concat", "1", "2"]).returncode == 0
    assert (run / "test" / "concat" / "k2").is_dir() and (run / "test" / "teacher_forced_pairs.tsv").is_file()
    args = ["test.py", "--run", str(run), "--concat", "1", "--overwrite", "--set", "evaluation.teacher_forced=false"]
    assert run_in_process(args).returncode == 0
    left = sorted(p.relative_to(run / "test").as_posix() for p in (run / "test").rglob("*"))
    assert left == [
        "concat",
        "concat/k1",
        "concat/k1/hypotheses.txt",
        "concat/k1/references.txt",
        "concat/k1/sources.txt",
        "hypotheses.txt",
        "references.txt",
        "scores.json",
        "source_lengths.txt",
        "sources.txt",
    ]
    assert sorted(json.loads((run / "test" / "scores.json").read_text())["files"]) == [
        p for p in left if "." in p and p != "scores.json"
    ]


@pytest.mark.slow
def test_a_test_left_stale_by_more_training_is_marked_refused_by_the_archive_and_retested(
    trained_run: Path, tmp_path: Path
) -> None:
    """Issue 75, case 4: tested at step 6, then trained on to step 12 (`train.py --run`, a better
    checkpoint kept): compare.py exits 0 but marks the row and names the test.py command that re-tests
    it (on stderr and in summary.md); the archive refuses it in one line, creating nothing; a sweep
    tests it again, after which the run reads current and packs."""
    runs_root = tmp_path / "runs"
    run = runs_root / "demo" / "rope"
    shutil.copytree(trained_run, run)
    shutil.rmtree(run / "test", ignore_errors=True)
    assert run_in_process(["test.py", "--run", str(run), "--set", "evaluation.teacher_forced=false"]).returncode == 0
    proc = run_in_process(["train.py", "--run", str(run), "--set", "training.max_steps=12"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    retest = f"python test.py --run {run} --overwrite"

    summary = tmp_path / "summary"
    proc = run_in_process(["compare.py", str(run), "--output", str(summary)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "test/ scored the checkpoint of step 6" in proc.stderr and retest in proc.stderr, proc.stderr[-2000:]
    table = (tmp_path / "summary.md").read_text()
    assert "| demo/rope §" in table or "rope §" in table, table
    assert "§ `" in table and "test/ scored the checkpoint of step 6" in table and retest in table, table

    results = tmp_path / "results"
    pack = ["tools/archive.py", "pack", str(runs_root / "demo"), "--runs", str(runs_root), "--results", str(results)]
    message = one_error_line(run_in_process(pack))
    assert "test/ scored the checkpoint of step 6" in message and retest in message, message
    assert not (results / "demo" / "rope").exists()

    sets = [s for s in tiny_overrides(run, tmp_path / "cache", steps=12)[1::2] if not s.startswith("run_dir=")]
    sets.append("evaluation.teacher_forced=false")  # as tested: only the stale checkpoint makes it test again
    proc = run_in_process(["sweep.py", ROPE, "--runs_root", str(runs_root), *with_sets([], *sets)])
    assert proc.returncode == 0 and "of step 6" in proc.stdout and "tested again" in proc.stdout, proc.stdout[-2000:]
    proc = run_in_process(["compare.py", str(run)])
    assert proc.returncode == 0 and "§" not in proc.stdout and "scored the checkpoint" not in proc.stderr
    assert run_in_process(pack).returncode == 0
