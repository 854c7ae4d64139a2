"""The local launcher's GPU slots and the SLURM time limits (commands/launchers.py); the launchers
themselves run real sweeps in tests/test_compare.py (local, two at a time) and tests/test_slurm.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from commands.launchers import LaunchOptions, gpu_slots, minutes, run_local
from commands.sweep_job import Outcome
from utils.config import ConfigError


def test_gpu_slots_share_each_gpu_runs_per_gpu_times() -> None:
    assert gpu_slots(2, 1, 1) == [(0,), (1,)]
    assert gpu_slots(2, 1, 3) == [(0,), (0,), (0,), (1,), (1,), (1,)]
    assert gpu_slots(4, 2, 1) == [(0, 1), (2, 3)]
    assert gpu_slots(3, 2, 2) == [(0, 1), (0, 1)]  # the odd GPU is left out rather than split
    assert gpu_slots(0, 1, 4) == [()] and gpu_slots(2, 0, 1) == [()]
    with pytest.raises(ConfigError, match="--gpus_per_run 3"):
        gpu_slots(2, 3, 1)


@pytest.mark.parametrize("text, expected", [("90", 90), ("1:30:00", 90), ("1-00:00:00", 1440), ("10:30", 11),
                                            ("0", 1), ("00:00:30", 1)])
def test_time_limits_in_minutes(text: str, expected: int) -> None:
    assert minutes(text) == expected


@pytest.mark.parametrize("text", ["1h", "", "1:2:3:4", "-5"])
def test_a_malformed_time_limit_is_named(text: str) -> None:
    with pytest.raises(ConfigError, match="--time"):
        minutes(text)


class VisibleDevices:
    """A job that reports the GPUs it was given (and stays a moment, so the four overlap)."""

    def __call__(self) -> Outcome:
        import time

        time.sleep(1.0)
        return Outcome(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), "scored")


def test_local_jobs_get_their_slot_of_gpus(tmp_path: Path, monkeypatch) -> None:
    """On a machine with 2 GPUs, --runs_per_gpu 2: four jobs at once, two on each GPU."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1])]))
    options = LaunchOptions(launcher="local", log_dir=tmp_path, gpus_per_run=1, runs_per_gpu=2)
    outcomes = run_local([VisibleDevices() for _ in range(4)], [f"run{i}" for i in range(4)], options)
    assert sorted(o.run_dir for o in outcomes) == ["0", "0", "1", "1"]
    options.parallel = 1  # --parallel caps the slots: one job at a time, on the first GPU
    outcomes = run_local([VisibleDevices() for _ in range(2)], ["a", "b"], options)
    assert [o.run_dir for o in outcomes] == ["0", "0"]
