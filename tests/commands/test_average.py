"""Checkpoint averaging produces a checkpoint that test.py and inference.py accept."""

from __future__ import annotations

from pathlib import Path

import torch
from in_process import run_in_process as run

from artifacts.checkpoint import read_checkpoint
from commands import average


def test_average_last_two_is_the_mean(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "avg.pt"
    assert average.main(["--run", str(trained_run), "--average_last", "2", "--output", str(out)]) == 0
    ckpts = trained_run / "checkpoints"
    a, b = (
        read_checkpoint(ckpts / "last_checkpoint_3.pt")["model"],
        read_checkpoint(ckpts / "last_checkpoint_6.pt")["model"],
    )
    avg = read_checkpoint(out)["model"]
    for key in avg:
        if avg[key].is_floating_point():
            assert torch.allclose(avg[key], (a[key] + b[key]) / 2, atol=1e-6), key
    proc = run(["inference.py", "--model_path", str(out), "--src_text", "Bonjour !"])
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_average_needs_enough_checkpoints(trained_run: Path, tmp_path: Path) -> None:
    proc = run(["average.py", "--run", str(trained_run), "--average_last", "50", "--output", str(tmp_path / "x.pt")])
    assert proc.returncode == 2 and "keep_last" in proc.stderr
