"""sweep.py --launcher slurm against a real SLURM cluster started on this machine (tests/slurm_cluster.py):
a sweep of 2 configs x 2 seeds as a job array, and a job requeued mid-training (`scontrol requeue`,
what a preemption does) that resumes from its checkpoint and ends equal to an uninterrupted run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import ROOT, final_params, losses, read_jsonl, tiny_overrides, with_sets
from slurm_cluster import LocalSlurm, missing_binaries

pytestmark = pytest.mark.slow  # a real SLURM cluster started and stopped, sweeps of real jobs

CONFIGS = ("configs/demo/sinusoidal.yaml", "configs/demo/rope.yaml")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"SLURM is not installed here (no {', '.join(missing)}): apt-get install slurm-wlm munge, as .ci/run does"
        )
    with LocalSlurm(tmp_path_factory.mktemp("slurm")) as running:
        yield running


def sweep_args(base: Path, steps: int) -> list[str]:
    sets = tiny_overrides(Path("unused"), base / "cache", steps=steps)[2:]  # run_dir: one per seed, from sweep
    return [
        *with_sets(
            sets, "training.bleu_sentences=0", "training.validate_every_steps=4", "evaluation.teacher_forced=false"
        ),
        "--runs_root",
        str(base / "runs"),
        "--output",
        str(base / "summary"),
    ]


def sweep(cluster: LocalSlurm, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "sweep.py", *args],
        cwd=ROOT,
        env={**cluster.env, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_sweep_runs_as_a_slurm_job_array(cluster: LocalSlurm, tmp_path: Path) -> None:
    proc = sweep(
        cluster,
        *CONFIGS,
        "--seeds",
        "1",
        "2",
        *sweep_args(tmp_path, steps=6),
        "--launcher",
        "slurm",
        "--cpus_per_run",
        "1",
        "--time",
        "10",
    )
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    runs = sorted((tmp_path / "runs" / "demo").iterdir())
    assert [r.name for r in runs] == ["rope_seed1", "rope_seed2", "sinusoidal_seed1", "sinusoidal_seed2"]
    for run in runs:
        assert json.loads((run / "test" / "scores.json").read_text())["num_sentences"] == 10
    assert (tmp_path / "summary.md").is_file() and "demo/rope" in (tmp_path / "summary.md").read_text()
    logs = tmp_path / "submitit"
    assert len(list(logs.glob("*/*_log.out"))) == 4 and len(list(logs.glob("*/*_result.pkl"))) == 4
    array = (
        next(line for line in out.splitlines() if "submitted 4 SLURM job(s)" in line).split("array ")[1].split(")")[0]
    )
    states = cluster.run("squeue", "-h", "--states=all", "-j", array, "-o", "%T").split()
    assert states == ["COMPLETED"] * 4  # each run was a SLURM job of the array, and each ended well


def test_a_requeued_job_resumes_and_ends_equal_to_an_uninterrupted_run(cluster: LocalSlurm, tmp_path: Path) -> None:
    steps = 200  # far more than the first checkpoint (step 4): the requeue cannot come after the end
    args = [CONFIGS[0], "--seeds", "1", *sweep_args(tmp_path / "requeued", steps)]
    proc = sweep(cluster, *args, "--launcher", "slurm", "--cpus_per_run", "1")
    run_dir = tmp_path / "requeued" / "runs" / "demo" / "sinusoidal_seed1"
    deadline = time.time() + 300
    while not list((run_dir / "checkpoints").glob("last_checkpoint_*.pt")):
        assert time.time() < deadline and proc.poll() is None, proc.stdout.read()[-4000:] if proc.poll() else "timeout"
        time.sleep(0.05)
    (job,) = cluster.run("squeue", "-h", "-o", "%i").split()
    cluster.run("scontrol", "requeue", job)  # SLURM stops the job (SIGTERM) and queues it again
    while "PENDING" not in cluster.run("squeue", "-h", "-j", job, "-o", "%T"):
        assert time.time() < deadline, "the requeued job never went back to the queue"
        time.sleep(0.2)
    cluster.run("scontrol", "update", f"JobId={job}", "StartTime=now")  # not the default 2-minute hold
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    assert "Restarts=1" in cluster.run("scontrol", "show", "job", job)
    starts = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"]
    assert len(starts) == 2 and 0 < starts[1]["step"] < steps  # the second attempt resumed from a checkpoint
    ends = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "end"]
    assert ends[-1]["finished"] is True and ends[-1]["step"] == steps

    full = subprocess.run(
        [sys.executable, "sweep.py", CONFIGS[0], "--seeds", "1", *sweep_args(tmp_path / "full", steps)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**cluster.env, "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert full.returncode == 0, full.stdout[-3000:] + full.stderr[-3000:]
    full_dir = tmp_path / "full" / "runs" / "demo" / "sinusoidal_seed1"
    a, b = final_params(full_dir), final_params(run_dir)
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert losses(run_dir) == pytest.approx(losses(full_dir), rel=1e-6)
    assert (run_dir / "test" / "hypotheses.txt").read_text() == (full_dir / "test" / "hypotheses.txt").read_text()
    scores = [json.loads((d / "test" / "scores.json").read_text())["sacrebleu"] for d in (run_dir, full_dir)]
    assert scores[0] == scores[1]
