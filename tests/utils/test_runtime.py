"""Runtime helpers (utils/runtime.py): a seed that repeats every generator, devices asked for by name
or found (one line naming who asked for a missing one), and autocast per precision."""

from __future__ import annotations

import random

import pytest
import torch

from utils.runtime import DeviceError, autocast, pick_device, rank0_first, seed_everything


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


def test_rank0_first_is_the_call_itself_in_one_process() -> None:
    assert rank0_first(lambda: 42) == 42
    with pytest.raises(KeyError):
        rank0_first(lambda: {}["missing"])
