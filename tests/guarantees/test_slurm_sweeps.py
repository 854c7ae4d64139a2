"""Sweeps on SLURM. A cancelled or failed job is reported by run and the sweep
exits non-zero rather than waiting for ever (squeue's states: a cluster without accounting gives sacct
nothing); a rerun after Ctrl-C waits for the jobs already submitted instead of submitting them twice;
a flag SLURM refuses (--partition, --mem, --cpus_per_run), a --time too short to checkpoint and
requeue, or no SLURM at all is one line before anything is submitted; a job stopped by a signal
ends with one line in its log, never a traceback. The fast tests use recorded squeue output and
stand-in commands; the slow ones the real controller of tests/slurm_cluster.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import CONFIG, ROOT, one_error_line, tiny_overrides, with_sets
from in_process import run_in_process as run
from slurm_cluster import LocalSlurm, missing_binaries

from commands import launchers, slurm
from commands.slurm import JobState, ended_how, parse_squeue, watch_slurm
from commands.sweep_job import guarded
from settings.config import ConfigError

# `squeue -h -r --states=all -O <slurm.SQUEUE_FORMAT>`: the first five rows as the suite's cluster printed
# them (an array with tasks cancelled, running; a job that exited 3; one pending), the last three in the
# same form for what it cannot produce (exit 4 after a checkpoint, out of memory, a node failure)
RECORDED_SQUEUE = """\
1_1                                     CANCELLED               15          Resources
1_2                                     CANCELLED               0           Resources
2                                       FAILED                  768         NonZeroExitCode
3                                       PENDING                 0           PartitionConfig
1_0                                     RUNNING                 0           None
4                                       FAILED                  1024        NonZeroExitCode
5                                       OUT_OF_MEMORY           0           OutOfMemory
6                                       NODE_FAIL               0           NodeFail
"""


def test_job_states_tell_how_a_job_ended_without_a_result() -> None:
    states = parse_squeue(RECORDED_SQUEUE)
    assert states["1_0"] == JobState("RUNNING", "None", 0) and states["3"].reason == "PartitionConfig"
    assert ended_how(states["1_0"]) is None and ended_how(states["3"]) is None  # may still run
    assert ended_how(states["1_1"]) == ("interrupted", "was cancelled (scancel)")
    assert ended_how(states["2"]) == ("failed", "failed with exit code 3")
    assert ended_how(states["4"])[0] == "interrupted"  # exit 4: stopped after a checkpoint, resumable
    assert ended_how(states["5"]) == ("failed", "ran out of memory (give it more --mem)")
    assert "node failure" in ended_how(states["6"])[1]
    assert ended_how(None) == ("interrupted", "is no longer known to SLURM and left no result")


def fake_job(tmp_path: Path, job_id: str):
    return SimpleNamespace(job_id=job_id, paths=SimpleNamespace(result_pickle=tmp_path / "none.pkl", stderr="x.err"))


def test_the_client_stops_waiting_for_a_cancelled_job(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(launchers, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(slurm, "RESULT_GRACE_S", 0.0)
    answers = iter([RECORDED_SQUEUE.replace("CANCELLED", "PENDING"), RECORDED_SQUEUE])
    monkeypatch.setattr(slurm, "queue_states", lambda: parse_squeue(next(answers)))
    outcomes = watch_slurm({0: fake_job(tmp_path, "1_1")}, ["runs/a"])
    assert outcomes[0].status == "interrupted" and outcomes[0].rc == 4
    assert "runs/a: its SLURM job 1_1 was cancelled (scancel)" in outcomes[0].message
    assert "PartitionConfig" not in capsys.readouterr().out  # (job 3 is not this sweep's)


def test_a_job_pending_for_a_reason_slurm_does_not_resolve_is_said_once(tmp_path: Path, capsys) -> None:
    """--cpus_per_run more than a node has (where sbatch still takes it) pends for ever: said, once."""
    said: dict = {}
    states = parse_squeue(RECORDED_SQUEUE)
    for _ in range(3):
        for job_id in ("3", "1_0"):  # pending (PartitionConfig), running
            slurm.say_pending(fake_job(tmp_path, job_id), states[job_id], "runs/a", said)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "runs/a: its SLURM job 3 is pending (PartitionConfig)" in lines[0]
    assert "--cpus_per_run" in lines[0] and "scancel 3" in lines[0]


def tiny_sweep(tmp_path: Path, *flags: str, sets: tuple[str, ...] = ()) -> list[str]:
    tiny = with_sets(tiny_overrides(tmp_path / "unused", tmp_path / "cache", steps=4)[2:], *sets)
    return ["sweep.py", CONFIG, *tiny, "--runs_root", str(tmp_path / "runs"), "--launcher", "slurm", *flags]


def test_no_slurm_here_is_one_line_naming_the_launchers_that_work(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    line = one_error_line(run(tiny_sweep(tmp_path)))
    assert "SLURM was not found here (no sbatch on PATH)" in line and "--launcher local" in line


def test_a_time_limit_too_short_to_requeue_is_one_line(tmp_path: Path) -> None:
    line = one_error_line(run(tiny_sweep(tmp_path, "--time", "2")))
    assert line.startswith("error: --time 2: a SLURM job needs at least 5 minutes")


def test_a_flag_sbatch_refuses_is_named(tmp_path: Path, monkeypatch) -> None:
    """A stand-in sbatch that refuses more than 4 CPUs: the refused flag is named, nothing submitted."""
    (tmp_path / "bin").mkdir()
    sbatch = tmp_path / "bin" / "sbatch"
    sbatch.write_text(
        '#!/bin/sh\ncase "$*" in *--test-only*cpus-per-task=64*) '
        'echo "allocation failure: Requested node configuration is not available" >&2; exit 1;; '
        '*--test-only*) exit 0;; esac\ntouch "$0.submitted"; exit 1\n'
    )
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    line = one_error_line(run(tiny_sweep(tmp_path, "--cpus_per_run", "64", "--mem", "1G")))
    assert line.startswith("error: --cpus_per_run 64: SLURM refuses the job (Requested node configuration")
    assert not (tmp_path / "bin" / "sbatch.submitted").exists()


def test_a_ctrl_c_while_submitting_stops_once_the_jobs_are_recorded(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C while sbatch submits the array (stand-ins for sbatch and srun that accept it): the sweep
    stops once every job is submitted and recorded, instead of dropping the Ctrl-C (and the next
    sweep waits for the recorded jobs rather than submitting them twice)."""
    import os

    import submitit
    from launcher_jobs import Fails

    (tmp_path / "bin").mkdir()
    for name in ("sbatch", "srun"):
        (tmp_path / "bin" / name).write_text('#!/bin/sh\necho "Submitted batch job 4242"\n')
        (tmp_path / "bin" / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    submit = submitit.SlurmExecutor._submit_command

    def ctrl_c_while_submitting(executor, command):
        os.kill(os.getpid(), signal.SIGINT)
        return submit(executor, command)

    monkeypatch.setattr(submitit.SlurmExecutor, "_submit_command", ctrl_c_while_submitting)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # (the suite may run with it ignored)
    try:
        with pytest.raises(KeyboardInterrupt):
            options = launchers.LaunchOptions(launcher="slurm", log_dir=tmp_path / "logs")
            slurm.submit_array([Fails(), Fails()], [str(tmp_path / "r1"), str(tmp_path / "r2")], options)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert all(json.loads(slurm.job_record(str(tmp_path / r)).read_text())["job_id"] for r in ("r1", "r2"))


def test_a_signal_in_a_job_is_one_line_and_no_result(capsys) -> None:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:

        def stopped():
            raise KeyboardInterrupt

        with pytest.raises(SystemExit) as ended:
            guarded("runs/a", stopped)
        assert ended.value.code == 4
        err = capsys.readouterr().err
        assert err.startswith("interrupted: ") and len(err.strip().splitlines()) == 1

        def refused():
            raise ConfigError("data.path x: no such file")

        outcome = guarded("runs/a", refused)
        assert (outcome.status, outcome.rc, outcome.message) == ("failed", 2, "data.path x: no such file")
        assert capsys.readouterr().err == "error: data.path x: no such file\n"
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_out_of_memory_on_the_device_in_a_job_is_one_line(capsys) -> None:
    """The guard of a sweep job knows what main_guard knows (commands.cli.describe_failure): torch's
    out of memory is a failed run named in one line of the job's log, not a traceback."""
    import torch

    def too_large():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nsee PYTORCH_CUDA_ALLOC_CONF")

    outcome = guarded("runs/a", too_large)
    assert (outcome.status, outcome.rc) == ("failed", 2), outcome
    assert outcome.message.startswith("out of memory on the device (CUDA out of memory. Tried to allocate 2.00 GiB)")
    err = capsys.readouterr().err
    assert err == f"error: {outcome.message}\n", err


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = missing_binaries()
    if missing:
        pytest.skip(f"SLURM is not installed here (no {', '.join(missing)}): apt-get install slurm-wlm munge")
    with LocalSlurm(tmp_path_factory.mktemp("slurm")) as running:
        yield running


@pytest.mark.slow
def test_a_bad_partition_is_one_line(cluster: LocalSlurm, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    line = one_error_line(run(tiny_sweep(tmp_path, "--partition", "nope")))
    assert line.startswith("error: --partition nope: SLURM refuses the job (invalid partition specified: nope)")
    assert cluster.run("squeue", "-h") == ""  # nothing submitted


def start_sweep(cluster: LocalSlurm, tmp_path: Path) -> subprocess.Popen:
    sets = ("training.bleu_sentences=0", "evaluation.teacher_forced=false")
    args = tiny_sweep(tmp_path, "--seeds", "1", "2", "--slurm_array_parallelism", "1", "--time", "10", sets=sets)
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env={**cluster.env, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(proc: subprocess.Popen, text: str) -> str:
    seen = ""
    while text not in seen:
        line = proc.stdout.readline()
        assert line, seen[-3000:]
        seen += line
    return seen


@pytest.mark.slow
def test_a_rerun_waits_for_the_jobs_and_a_cancelled_one_is_reported(cluster: LocalSlurm, tmp_path: Path) -> None:
    """Ctrl-C after submitting, then the same command: it waits for the two jobs (no second array);
    one job cancelled: the sweep names its run and how it ended, and exits non-zero soon after."""
    first = start_sweep(cluster, tmp_path)
    read_until(first, "submitted 2 SLURM job(s)")
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=30) == 4
    second = start_sweep(cluster, tmp_path)
    seen = read_until(second, "seed2 is in SLURM job")
    # seed1's job may have ended (trained and scored) before the second command looked: then it is
    # skipped as finished; either way nothing is submitted again
    seed1_done = "sinusoidal_seed1 is finished" in seen
    assert "submitted" not in seen and ("seed1 is in SLURM job" in seen or seed1_done), seen
    jobs = cluster.run("squeue", "-h", "-r", "-o", "%i").split()
    # (a job whose run is finished may still be listed for a moment while SLURM ends it)
    assert len(jobs) in ((1, 2) if seed1_done else (2,)) and len({j.split("_")[0] for j in jobs}) == 1  # one array
    cluster.run("scancel", max(jobs))  # the second task, pending behind --slurm_array_parallelism 1
    cancelled = time.time()
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 4 and time.time() - cancelled < 60, out[-3000:]
    # SLURM lists a pending array task cancelled before it ran as CANCELLED, or (slurmctld merges it
    # back into the array's record) drops it from squeue at once: then the sweep says so after its grace
    ended = ("was cancelled (scancel)", "is no longer known to SLURM and left no result")
    assert any(f"seed2: its SLURM job {max(jobs)} {how}" in out for how in ended), out[-3000:]
    assert ("seed1: scored" in out or seed1_done) and "sacct" not in out and "Traceback" not in out
    assert not list((tmp_path / "runs" / "demo").glob(".*.slurm_job"))  # records go with their jobs
    job_logs = list((tmp_path / "runs" / "submitit").glob("*/*_log.err"))
    assert job_logs and not any("Traceback" in log.read_text() for log in job_logs)
    assert json.loads((tmp_path / "runs" / "demo" / "sinusoidal_seed1" / "test" / "scores.json").read_text())


def test_a_finished_runs_job_record_goes_when_a_sweep_finds_it_scored(trained_run: Path, tmp_path: Path) -> None:
    """A job that ended while no sweep command watched (a Ctrl-C, then a later call): the later call
    skips the scored run and removes its record, which would otherwise stay beside it for good."""
    import shutil

    runs_root = tmp_path / "runs"
    run_dir = runs_root / "demo" / "rope"  # sweep's folder for the fixture's config under --runs_root
    shutil.copytree(trained_run, run_dir)
    assert run(["test.py", "--run", str(run_dir)]).returncode == 0
    record = slurm.job_record(str(run_dir))
    record.write_text(json.dumps({"job_id": "41_0", "log_dir": str(tmp_path / "logs")}))
    sets = [s for s in tiny_overrides(run_dir, tmp_path / "cache")[1::2] if not s.startswith("run_dir=")]
    proc = run(
        [
            "sweep.py",
            "configs/demo/rope.yaml",
            "--runs_root",
            str(runs_root),
            *[a for s in sets for a in ("--set", s)],
            "--launcher",
            "local",
        ]
    )
    assert proc.returncode == 0 and "is finished" in proc.stdout, proc.stderr[-3000:]
    assert not record.exists()
