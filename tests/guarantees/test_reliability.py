"""Interrupted training, damaged checkpoints and divergence give clean outcomes, never a deep traceback."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, final_params, losses, read_jsonl, tiny_overrides, with_sets
from in_process import run_in_process as run  # a subprocess only where a signal is sent


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_the_run_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [
        "train.py",
        "--config",
        "configs/demo/sinusoidal.yaml",
        *with_sets(tiny_overrides(run_dir, tmp_path / "cache", steps=100000), "training.validate_every_steps=1000"),
    ]
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    metrics = run_dir / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics.is_file() and '"train"' in metrics.read_text()):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err[-3000:]  # EXIT_INTERRUPTED: saved and resumable, not finished
    assert "received signal" in out + err
    end = [r for r in read_jsonl(metrics) if r["event"] == "end"][-1]
    stopped_at = end["step"]
    assert 0 < stopped_at < 100000 and end["finished"] is False and end["stopped_by_signal"] == signal.SIGTERM
    assert list((run_dir / "checkpoints").glob(f"last_checkpoint_{stopped_at}.pt"))
    resumed = run(["train.py", "--run", str(run_dir), "--set", f"training.max_steps={stopped_at + 2}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [r["step"] for r in read_jsonl(metrics) if r["event"] == "start"] == [0, stopped_at]
    assert [r["finished"] for r in read_jsonl(metrics) if r["event"] == "end"] == [False, True]


def test_truncated_checkpoint_is_named_and_resume_falls_back(trained_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    newest = max((run_dir / "checkpoints").glob("last_*.pt"), key=lambda p: p.stat().st_mtime)
    newest.write_bytes(newest.read_bytes()[:1000])  # a half-written file
    proc = run(["inference.py", "--model_path", str(newest), "--src_text", "Bonjour !"])
    assert proc.returncode == 2 and newest.name in proc.stderr and "Traceback" not in proc.stderr
    resumed = run(["train.py", "--run", str(run_dir), "--set", "training.max_steps=8"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert newest.name in resumed.stdout + resumed.stderr and "falling back" in resumed.stdout + resumed.stderr


def test_divergence_stops_with_a_message(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run(
        [
            "train.py",
            "--config",
            "configs/demo/sinusoidal.yaml",
            *with_sets(
                tiny_overrides(run_dir, tmp_path / "cache"),
                "training.lr=1e30",
                "training.clip_grad_norm=null",
                "training.max_steps=50",
            ),
        ]
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "diverged" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    import torch

    def args(run_dir: Path, steps: int) -> list[str]:
        return [
            "train.py",
            "--config",
            "configs/demo/sinusoidal.yaml",
            *with_sets(
                tiny_overrides(run_dir, tmp_path / "cache", steps=steps),
                "training.validate_every_steps=4",
                "training.log_every=2",
                "training.bleu_sentences=0",
            ),
        ]

    # The full length leaves the killed run far from the end however late the kill comes under load
    # (it must still be short of `steps` for the resume to retrain anything).
    steps = 40
    full = tmp_path / "full"
    assert run(args(full, steps)).returncode == 0
    # The interrupted run: killed hard (no handler runs) some time after its step-8 checkpoint.
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, *args(killed, 100000)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 120
    while time.time() < deadline and not list((killed / "checkpoints").glob("last_checkpoint_8.pt")):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    resumed = run(["train.py", "--run", str(killed), "--set", f"training.max_steps={steps}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    a, b = final_params(full), final_params(killed)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key
    assert losses(killed) == pytest.approx(losses(full), rel=1e-6)


def test_same_config_and_seed_give_the_samelosses(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        proc = run(
            [
                "train.py",
                "--config",
                "configs/demo/rope.yaml",
                *tiny_overrides(tmp_path / name, tmp_path / "cache", steps=6),
            ]
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(losses(tmp_path / name))
    assert runs[0] == runs[1] and len(runs[0]) == 3
