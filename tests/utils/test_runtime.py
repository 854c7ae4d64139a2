"""Runtime helpers (utils/runtime.py): a seed that repeats every generator, devices asked for by name
or found (one line naming who asked for a missing one), autocast per precision, and the metrics log
(one JSON object per line; a resume's history drops what an interrupted attempt logged after its step)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from utils.runtime import DeviceError, JsonlLogger, autocast, pick_device, rank0_first, seed_everything


def test_a_seed_repeats_python_torch_and_numpy() -> None:
    import numpy as np

    seed_everything(7)
    first = (random.random(), torch.rand(3), np.random.rand())
    seed_everything(7)
    again = (random.random(), torch.rand(3), np.random.rand())
    assert first[0] == again[0] and torch.equal(first[1], again[1]) and first[2] == again[2]


def test_devices_by_name_and_a_missing_one_named_with_who_asked(monkeypatch) -> None:
    assert pick_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto").type in ("cpu", "mps")
    with pytest.raises(DeviceError, match=r"device cuda:1 was asked for \(--device\) but no CUDA GPU is visible"):
        pick_device("cuda:1", "--device")


def test_autocast_per_precision_on_cpu() -> None:
    with autocast("bf16", "cpu"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast("fp32", "cpu"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


def test_the_metrics_log_and_a_resumes_history(tmp_path: Path) -> None:
    log = JsonlLogger(tmp_path / "metrics.jsonl")
    assert log.read() == []
    log.write("start", step=0)
    for step in (100, 200, 300):
        log.write("train", step=step, loss=1.0)
    log.write("start", step=200, resume=True)  # an attempt killed after step 300 resumes from step 200
    log.write("train", step=300, loss=0.9)
    assert [(r["event"], r["step"]) for r in log.history()] == [
        ("start", 0),
        ("train", 100),
        ("train", 200),
        ("start", 200),
        ("train", 300),
    ]
    assert len(log.read("train")) == 4
    with open(log.path, "a") as f:
        f.write("[1, 2]\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl:7: not a JSON object"):
        log.read()


def test_rank0_first_is_the_call_itself_in_one_process() -> None:
    assert rank0_first(lambda: 42) == 42
    with pytest.raises(KeyError):
        rank0_first(lambda: {}["missing"])
