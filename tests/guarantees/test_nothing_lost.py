"""Nothing the user made is lost, and nothing silently wrong: run folders, sweeps, non-finite
weights, failed starts, changed settings on resume, gradient accumulation, unsafe checkpoints.
Each test goes through the real command-line entry points."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import torch
from helpers import CONFIG, one_error_line, read_jsonl, snapshot, tiny_overrides, train
from in_process import run_in_process as run  # every entry point here runs in this process

# ---- 1. --overwrite deletes only the harness's own run folder, and only after start-up checks


def test_overwrite_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "other_project" / "checkpoints").mkdir(parents=True)
    (mine / "notes.txt").write_text("three weeks of notes")
    (mine / "other_project" / "checkpoints" / "model.pt").write_bytes(b"weights")
    before = snapshot(mine)
    message = one_error_line(train(mine, tmp_path / "cache", flags=("--overwrite",)))
    assert "not a run folder of this harness" in message and "notes.txt" in message
    assert snapshot(mine) == before


def test_overwrite_of_a_run_checks_the_corpus_before_deleting(trained_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    before = snapshot(run_dir)
    message = one_error_line(
        train(run_dir, tmp_path / "cache", "data.path=data/corpora/typo.tsv.gz", flags=("--overwrite",))
    )
    assert "typo.tsv.gz" in message
    assert snapshot(run_dir) == before  # the corpus typo stopped it before anything was deleted
    proc = train(run_dir, tmp_path / "cache", steps=2, flags=("--overwrite",))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "end"] == [2]


# ---- 2. a sweep never deletes a run


def test_sweep_tests_a_finished_run_that_kept_only_its_best_checkpoint(trained_run: Path, tmp_path: Path) -> None:
    runs_root = tmp_path / "runs"
    run_dir = runs_root / "demo" / "rope"  # the fixture's config name: sweep's folder for it under --runs_root
    shutil.copytree(trained_run, run_dir)
    for last in (run_dir / "checkpoints").glob("last_*.pt"):
        last.unlink()
    shutil.rmtree(run_dir / "test", ignore_errors=True)
    best = {p.name: p.read_bytes() for p in (run_dir / "checkpoints").glob("best_*.pt")}
    starts = len([r for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"])
    foreign = runs_root / "demo" / "sinusoidal"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("\\chapter{}")
    sets = [
        x
        for s in tiny_overrides(run_dir, tmp_path / "cache")[1::2]
        if not s.startswith("run_dir=")
        for x in ("--set", s)
    ]
    proc = run(["sweep.py", CONFIG, "configs/demo/rope.yaml", "--runs_root", str(runs_root), *sets])
    assert proc.returncode == 2, proc.stderr[-3000:]  # one run left alone
    assert "kept best checkpoints only" in proc.stdout and "left alone" in proc.stdout
    assert {p.name: p.read_bytes() for p in (run_dir / "checkpoints").glob("best_*.pt")} == best
    assert len([r for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"]) == starts  # not retrained
    assert (run_dir / "test" / "scores.json").is_file()
    assert [p.name for p in foreign.iterdir()] == ["thesis.tex"]


# ---- 3. non-finite weights are never checkpointed; resume skips a non-finite checkpoint


def test_non_finite_weights_are_never_checkpointed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = train(
        run_dir,
        tmp_path / "cache",
        "training.lr=1e6",
        "training.validate_every_steps=2",
        "training.clip_grad_norm=null",
        steps=6,
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "no checkpoint was written" in proc.stderr
    valid = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "valid"]
    assert valid and valid[-1]["valid_loss"] != valid[-1]["valid_loss"]  # NaN: logged, not checkpointed
    assert not list(run_dir.rglob("*.pt"))
    # the repro's next step, `--run`: there is nothing to resume, so it starts over from step 0
    again = run(["train.py", "--run", str(run_dir), "--set", "training.lr=1e-3"])
    assert again.returncode == 0 and "holds no checkpoint" in again.stdout, again.stderr[-3000:]


def test_resume_skips_a_checkpoint_with_non_finite_weights(trained_run: Path, tmp_path: Path) -> None:
    from artifacts.checkpoint import read_checkpoint

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    newest = max((run_dir / "checkpoints").glob("last_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    state = read_checkpoint(newest)
    state["model"] = {
        k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in state["model"].items()
    }
    torch.save(state, newest)
    proc = run(["train.py", "--run", str(run_dir), "--set", "training.max_steps=8"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{newest.name} has non-finite weights" in proc.stdout
    starts = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"]
    assert starts[-1] < int(newest.stem.split("_")[-1])  # resumed from the older, finite checkpoint


def test_resume_and_lookup_go_by_step_when_a_copy_reordered_modification_times(
    trained_run: Path, tmp_path: Path
) -> None:
    from artifacts.checkpoint import checkpoint_step, find_last_checkpoint

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    last = sorted((run_dir / "checkpoints").glob("last_*.pt"), key=checkpoint_step)
    assert len(last) >= 2
    now = time.time()
    for age, path in enumerate(last):  # the highest step now looks oldest, as after a plain `cp -r`
        os.utime(path, (now - 1000 * age, now - 1000 * age))
    assert find_last_checkpoint(run_dir) == last[-1]
    proc = run(["train.py", "--run", str(run_dir), "--set", f"training.max_steps={checkpoint_step(last[-1]) + 2}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    starts = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"]
    assert starts[-1] == checkpoint_step(last[-1])


def test_a_resume_supersedes_what_an_interrupted_attempt_logged_after_its_checkpoint(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    from artifacts.checkpoint import checkpoint_step
    from study.read import run_records
    from utils.run_log import JsonlLogger

    run_dir = tmp_path / "run"
    first = train(run_dir, tmp_path / "cache", "training.validate_every_steps=4", "training.keep_last=4", steps=16)
    assert first.returncode == 0, first.stderr[-3000:]
    # As if killed after logging step 16 but before any checkpoint after step 8 was written.
    for path in (run_dir / "checkpoints").glob("*.pt"):
        if checkpoint_step(path) > 8:
            path.unlink()
    log = run_dir / "metrics.jsonl"
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if '"event": "end"' not in line))
    # The resume comes at least a second later, as it would in another process after the kill: an
    # event file is named by the second it was opened, then by a counter within its process, and
    # TensorBoard reads a run's files in name order (10 before 9 when both opened in one second).
    time.sleep(1.0)
    resumed = run(["train.py", "--run", str(run_dir), "--set", "training.max_steps=12", "--set", "training.lr=0.0005"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    raw = read_jsonl(log)
    assert [r["step"] for r in raw if r["event"] == "train"] == [2, 4, 6, 8, 10, 12, 14, 16, 10, 12]
    history = JsonlLogger(log).history()
    train_records = [r for r in history if r["event"] == "train"]
    assert [r["step"] for r in train_records] == [2, 4, 6, 8, 10, 12]
    assert train_records[-1] == [r for r in raw if r["event"] == "train"][-1]  # the resumed attempt's step 12
    assert train_records[-1]["loss"] != [r for r in raw if r["event"] == "train"][5]["loss"]  # new lr, new loss
    assert [r["step"] for r in history if r["event"] == "valid"] == [4, 8, 12]
    from settings.config import load_config

    row = run_records.summarise_run(run_dir, load_config(run_dir / "config.yaml"))
    assert [r.step for r in row.valid_curve] == [4, 8, 12]

    # As the TensorBoard server's Python loader reads them (the Rust loader hides as much or more).
    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    tb_loss = {e.step: float(make_ndarray(e.tensor_proto)) for e in events.Tensors("train/loss")}
    assert sorted(tb_loss) == [2, 4, 6, 8, 10, 12]
    assert tb_loss[12] == pytest.approx(train_records[-1]["loss"])
    assert [e.step for e in events.Tensors("valid/loss")] == [4, 8, 12]


# ---- 5. a start that failed before its first checkpoint can simply be run again


def test_a_damaged_training_log_counts_as_results(tmp_path: Path) -> None:
    """A run folder whose checkpoints were removed keeps its results; if its metrics.jsonl has a
    damaged line, the folder is still not taken for a failed start (which would be cleared)."""
    from settings.config import is_written_config
    from utils.run_folder import RunFolder

    run_dir = tmp_path / "run"
    assert train(run_dir, tmp_path / "cache", steps=2).returncode == 0
    shutil.rmtree(run_dir / "checkpoints")
    for leftover in run_dir.glob("test*"):
        shutil.rmtree(leftover)
    assert RunFolder.inspect(run_dir, is_written_config).state == "trained"
    with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as log:
        log.write('{"event": "train", "step": 3, "lo\n')  # cut off mid-line
    assert RunFolder.inspect(run_dir, is_written_config).state == "trained"
    (run_dir / "metrics.jsonl").write_text("[1, 2]\n")
    assert RunFolder.inspect(run_dir, is_written_config).state == "trained"


def test_a_failed_start_does_not_block_its_rerun(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    failed = train(run_dir, tmp_path / "cache", "data.path=data/corpora/typo.tsv.gz")
    assert "typo.tsv.gz" in one_error_line(failed)
    again = train(run_dir, tmp_path / "cache", steps=2)  # the same command, corpus fixed, no --overwrite
    assert again.returncode == 0, again.stderr[-3000:]
    # a finished run whose checkpoints were deleted (e.g. archived) keeps its results: not restarted
    shutil.rmtree(run_dir / "checkpoints")
    before = snapshot(run_dir)
    assert "already exists" in one_error_line(train(run_dir, tmp_path / "cache", steps=2))
    assert snapshot(run_dir) == before
    # a run killed (or diverged) before its first checkpoint, with no results: `--run` starts it from step 0
    log = run_dir / "metrics.jsonl"
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if '"event": "end"' not in line))
    resumed = run(["train.py", "--run", str(run_dir), "--set", "training.max_steps=2"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "holds no checkpoint" in resumed.stdout
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"] == [0]


# ---- 6. resume applies the settings it may change, and refuses the others


def test_resume_applies_a_new_learning_rate(trained_run: Path, tmp_path: Path) -> None:
    from artifacts.checkpoint import read_checkpoint
    from settings.config import load_config

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    old_lr = load_config(run_dir / "config.yaml").training.lr
    proc = run(["train.py", "--run", str(run_dir), "--set", "training.lr=1e-5", "--set", "training.max_steps=8"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resume: training.lr" in proc.stdout
    assert load_config(run_dir / "config.yaml").training.lr == 1e-5
    ckpt = read_checkpoint(run_dir / "checkpoints" / "last_checkpoint_8.pt")
    assert [g["initial_lr"] for g in ckpt["optimizer"]["param_groups"]] == [1e-5]
    assert ckpt["scheduler"]["base_lrs"] == [1e-5]
    # the step-8 LR is the schedule's factor at step 8 times the new peak, not the old one
    factor = ckpt["optimizer"]["param_groups"][0]["lr"] / 1e-5
    assert 0 < factor <= 1 and old_lr != 1e-5
    start = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"][-1]
    assert start["changed"] == {"training.lr": [old_lr, 1e-5], "training.max_steps": [6, 8]}


def test_resume_refuses_a_change_of_experiment(trained_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    before = snapshot(run_dir)
    proc = run(["train.py", "--run", str(run_dir), "--set", "training.max_tokens=500", "--set", "model.dropout=0.3"])
    message = one_error_line(proc)
    assert "training.max_tokens: 300 -> 500" in message and "model.dropout" in message
    assert snapshot(run_dir) == before  # config.yaml still says what the run did


# ---- 7. update_freq: max_steps counts updates, and a resume at any step is exact


def test_update_freq_counts_updates_and_resumes_exactly(tmp_path: Path) -> None:
    from artifacts.checkpoint import read_checkpoint

    def final(run_dir: Path, step: int) -> dict:
        return read_checkpoint(run_dir / "checkpoints" / f"last_checkpoint_{step}.pt")

    extra = ("training.update_freq=3", "training.validate_every_steps=1", "training.log_every=1")
    full = tmp_path / "full"
    assert train(full, tmp_path / "cache", *extra, steps=5).returncode == 0
    ckpt = final(full, 5)
    assert {int(s["step"]) for s in ckpt["optimizer"]["state"].values()} == {5}  # 5 optimizer updates
    assert ckpt["scheduler"]["last_epoch"] == 5
    part = tmp_path / "part"
    assert train(part, tmp_path / "cache", *extra, steps=2).returncode == 0
    resumed = run(["train.py", "--run", str(part), "--set", "training.max_steps=5"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = ckpt["model"], final(part, 5)["model"]
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key
    losses = {r["step"]: r["loss"] for r in read_jsonl(full / "metrics.jsonl") if r["event"] == "train"}
    assert sorted(losses) == [1, 2, 3, 4, 5]


# ---- 13. opening a checkpoint never runs code


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "code ran"))


def test_a_checkpoint_of_a_newer_format_is_refused(trained_run: Path, tmp_path: Path) -> None:
    from artifacts.checkpoint import read_checkpoint

    newest = max((trained_run / "checkpoints").glob("last_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    state = read_checkpoint(newest)
    state["meta"]["format_version"] = 99
    future = tmp_path / "future.pt"
    torch.save(state, future)
    assert "checkpoint format 99, newer than this harness reads" in one_error_line(
        run(["inference.py", "--model_path", str(future), "--src_text", "Bonjour !"])
    )


def test_a_checkpoint_with_a_code_payload_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    evil = tmp_path / "shared.pt"
    torch.save({"model": {}, "meta": _Payload(str(marker))}, evil)
    message = one_error_line(run(["inference.py", "--model_path", str(evil), "--src_text", "Bonjour !"]))
    assert "shared.pt is not a checkpoint of this harness" in message
    assert not marker.exists()
