"""The local launcher's GPU slots and the SLURM time limits (commands/launchers.py); the launchers
themselves run real sweeps in tests/commands/test_compare.py (local, two at a time) and tests/commands/test_slurm.py."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from launcher_jobs import Fails, VisibleDevices

from commands import launchers
from commands.launchers import LaunchOptions, gpu_slots, minutes, run_local
from commands.sweep_job import stop_request
from settings.config import ConfigError


def test_gpu_slots_share_each_gpu_runs_per_gpu_times() -> None:
    assert gpu_slots(2, 1, 1) == [(0,), (1,)]
    assert gpu_slots(2, 1, 3) == [(0,), (1,), (0,), (1,), (0,), (1,)]  # the first jobs spread over the GPUs
    assert gpu_slots(4, 2, 1) == [(0, 1), (2, 3)]
    assert gpu_slots(3, 2, 2) == [(0, 1), (0, 1)]  # the odd GPU is left out rather than split
    assert gpu_slots(0, 1, 4) == [()] and gpu_slots(2, 0, 1) == [()]
    with pytest.raises(ConfigError, match="--gpus_per_run 3"):
        gpu_slots(2, 3, 1)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90", 90),
        ("1:30:00", 90),
        ("1-00:00:00", 1440),
        ("10:30", 11),
        ("0", 1),
        ("00:00:30", 1),
        ("2-12", 3600),
        ("1-01:30", 1530),
    ],
)
def test_time_limits_in_minutes(text: str, expected: int) -> None:
    assert minutes(text) == expected


@pytest.mark.parametrize("text", ["1h", "", "1:2:3:4", "-5", "1-2:3:4:5"])
def test_a_malformed_time_limit_is_named(text: str) -> None:
    with pytest.raises(ConfigError, match="--time"):
        minutes(text)


@pytest.mark.slow
@pytest.mark.gpu_aware
def test_local_jobs_get_their_slot_of_gpus(tmp_path: Path, monkeypatch) -> None:
    """On a machine with 2 GPUs, --runs_per_gpu 2: four jobs at once, two on each GPU; the indices
    are those this process sees (CUDA_VISIBLE_DEVICES=2,3: GPUs 2 and 3)."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(launchers, "POLL_SECONDS", 0.1)  # (how often the launcher looks: not what is tested)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parents[1]), str(Path(__file__).parents[2])]))
    options = LaunchOptions(launcher="local", log_dir=tmp_path, gpus_per_run=1, runs_per_gpu=2)
    outcomes = run_local([VisibleDevices() for _ in range(4)], [f"run{i}" for i in range(4)], options)
    assert sorted(o.run_dir for o in outcomes) == ["2", "2", "3", "3"]
    options.parallel = 2  # --parallel caps the slots: two at a time, one on each GPU
    outcomes = run_local([VisibleDevices() for _ in range(2)], ["a", "b"], options)
    assert sorted(o.run_dir for o in outcomes) == ["2", "3"]


def test_a_job_that_raised_is_failed_not_interrupted(tmp_path: Path, monkeypatch) -> None:
    """A job whose code raised is reported as failed, naming the error (a job that ended without a
    result is the interrupted one)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parents[1]), str(Path(__file__).parents[2])]))
    monkeypatch.setattr(launchers, "POLL_SECONDS", 0.1)
    (outcome,) = run_local([Fails()], ["runs/x"], LaunchOptions(launcher="local", log_dir=tmp_path, gpus_per_run=0))
    assert outcome.status == "failed" and "FileExistsError: runs/x/config.yaml exists" in outcome.message


def test_a_ctrl_c_while_a_job_starts_stops_the_sweep(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C while the local launcher starts a job (the job's controller must not take it): the sweep
    stops once that job is started and recorded (it stops the job and raises KeyboardInterrupt)
    instead of dropping the Ctrl-C and starting the next job."""
    import signal

    import submitit

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parents[1]), str(Path(__file__).parents[2])]))
    monkeypatch.setattr(launchers, "POLL_SECONDS", 0.1)
    submit, started = submitit.LocalExecutor.submit, []

    def ctrl_c_while_submitting(executor, job):
        started.append(submit(executor, job))
        os.kill(os.getpid(), signal.SIGINT)  # before the launcher has recorded the job
        return started[-1]

    monkeypatch.setattr(submitit.LocalExecutor, "submit", ctrl_c_while_submitting)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # (the suite may run with it ignored)
    try:
        with pytest.raises(KeyboardInterrupt):
            options = LaunchOptions(launcher="local", log_dir=tmp_path, gpus_per_run=0, parallel=2)
            run_local([VisibleDevices(), VisibleDevices()], ["a", "b"], options)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(started) == 1 and started[0].done()  # the second never started; the first was waited for
    assert stop_request(started[0].paths).exists()


def test_training_gives_its_signals_back(tmp_path: Path) -> None:
    """train_run stops cleanly on SIGINT/SIGTERM/SIGUSR2 while it trains, and hands them back after:
    in a sweep job, submitit's requeue-on-SIGUSR2 must work again while the run is tested."""
    import signal

    from helpers import ROOT, tiny_overrides

    from commands.train import train

    def marker(signum, frame):
        pass

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)}
    try:
        for sig in saved:
            signal.signal(sig, marker)
        sets = tiny_overrides(tmp_path / "run", tmp_path / "cache", steps=2)[1::2]
        assert (
            train(config=str(ROOT / "configs/demo/sinusoidal.yaml"), overrides=[*sets, "training.bleu_sentences=0"])
            == 0
        )
        assert all(signal.getsignal(sig) is marker for sig in saved)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_signal_just_before_the_first_step_still_stops_training(tmp_path: Path, monkeypatch) -> None:
    """SIGTERM once training's handlers are in place but before the trainer runs (Ignite's run()
    clears a terminate() asked for earlier): the run stops as it starts, with a checkpoint and an
    interrupted end record, instead of training its whole budget (a sweep's Ctrl-C hit this window)."""
    import signal

    from helpers import ROOT, read_jsonl, tiny_overrides

    import training.handlers as handlers
    from commands.cli import EXIT_INTERRUPTED
    from commands.train import train

    start_of_session = handlers.mark_session_start  # called just before trainer.run

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return start_of_session(*args, **kwargs)

    monkeypatch.setattr(handlers, "mark_session_start", signalled)
    saved = signal.getsignal(signal.SIGTERM)
    try:
        sets = tiny_overrides(tmp_path / "run", tmp_path / "cache", steps=30)[1::2]
        assert (
            train(config=str(ROOT / "configs/demo/sinusoidal.yaml"), overrides=[*sets, "training.bleu_sentences=0"])
            == EXIT_INTERRUPTED
        )
    finally:
        signal.signal(signal.SIGTERM, saved)
    end = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if r["event"] == "end"][-1]
    assert end["step"] == 0 and end["finished"] is False and end["stopped_by_signal"] == signal.SIGTERM
    assert list((tmp_path / "run" / "checkpoints").glob("last_checkpoint_0.pt"))


@contextlib.contextmanager
def long_local_sweep(tmp_path: Path, **env: str):
    """A sweep of one 100,000-step local job, in a process group of its own (`env`: added to its
    environment). It takes SIGINT as a terminal's Ctrl-C would even when the suite was started where
    SIGINT is ignored (a background job of a non-interactive shell; children inherit that, and Python
    then installs no handler). Whatever of it still runs at the end is killed, so a failure leaves no
    training behind."""
    import signal
    import subprocess
    import sys

    from helpers import ROOT, tiny_overrides, with_sets

    tiny = tiny_overrides(tmp_path / "unused", tmp_path / "cache", steps=100000)[2:]
    sets = with_sets(tiny, "training.bleu_sentences=0", "training.validate_every_steps=1000")
    args = [
        sys.executable,
        "sweep.py",
        "configs/demo/sinusoidal.yaml",
        "--runs_root",
        str(tmp_path / "runs"),
        *sets,
        "--launcher",
        "local",
        "--parallel",
        "1",
    ]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a handled signal is reset at exec
    try:
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", **env},
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        yield proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the sweep's jobs too (they share its group)
        except ProcessLookupError:
            pass
        proc.communicate(timeout=30)


def wait_for(condition, proc, what: str, seconds: float = 180) -> None:
    import time

    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline and proc.poll() is None, f"never: {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_ctrl_c_stops_local_jobs_with_a_checkpoint(tmp_path: Path) -> None:
    """SIGINT to the sweep: each running job is stopped through its controller (SIGTERM), saves a
    checkpoint and is reported interrupted (exit 4), never finished or tested."""
    import signal

    from helpers import read_jsonl

    with long_local_sweep(tmp_path) as proc:
        metrics = tmp_path / "runs" / "demo" / "sinusoidal" / "metrics.jsonl"
        wait_for(lambda: metrics.is_file() and '"train"' in metrics.read_text(), proc, "a training step")
        proc.send_signal(signal.SIGINT)  # the sweep alone, as `kill -INT`: it must stop its jobs itself
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 4, out[-3000:]
        end = [r for r in read_jsonl(metrics) if r["event"] == "end"][-1]
        assert end["finished"] is False and end["stopped_by_signal"] == signal.SIGTERM
        assert list((metrics.parent / "checkpoints").glob(f"last_checkpoint_{end['step']}.pt"))
        assert not (metrics.parent / "test").exists()  # an interrupted training is never tested


@pytest.mark.slow
def test_ctrl_c_stops_a_local_job_before_its_handlers(tmp_path: Path) -> None:
    """Ctrl-C while a job starts, before it handles stops (submitit's handler drops SIGTERM there, and
    a job its controller has not started yet gets none): the job stops as its handlers come in place,
    never trains, and the sweep reports it interrupted (exit 4). The job waits at its start point
    until the stop has reached it, so the stop lands in that window every time."""
    import signal

    pause = tmp_path / "pause"
    pause.mkdir()
    with long_local_sweep(tmp_path, HARNESS_PAUSE_AT="sweep job", HARNESS_PAUSE_DIR=str(pause)) as proc:
        logs = tmp_path / "runs" / "submitit"
        wait_for(lambda: (pause / "sweep job.reached").exists(), proc, "the job's start point")
        proc.send_signal(signal.SIGINT)
        wait_for(
            lambda: any("Bypassing signal SIGTERM" in f.read_text() for f in logs.glob("*/*_log.*")),
            proc,
            "the stop at the job (submitit's handler logs it)",
        )
        (pause / "sweep job.go").touch()
        log = next(logs.glob("*/*_log.out"))
        wait_for(lambda: proc.poll() is not None or "sweep: training" in log.read_text(), proc, "the job's end")
        assert "sweep: training" not in log.read_text(), "the job went on to train after the stop"
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 4, out[-3000:]
        assert "stopped (Ctrl-C)" in out and not (tmp_path / "runs" / "demo" / "sinusoidal").exists()
