"""Data-parallel training with ignite.distributed (gloo on CPU, launched by torchrun)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import read_jsonl, tiny_overrides, torchrun, with_sets

pytestmark = pytest.mark.slow  # torchrun: two ranks, each a process of its own


@pytest.mark.parametrize("update_freq", [1, 2])
def test_two_ranks_on_half_batches_equal_one_process_on_the_whole_batch(tmp_path: Path, update_freq: int) -> None:
    """One update of 2 gloo ranks = one process on the union of their batches; with update_freq 2
    each rank accumulates two micro-batches (locally, under DDP's no_sync) before the all-reduce:
    each gradient bucket is all-reduced once per update, whatever update_freq."""
    import dist_step

    out = tmp_path / "ddp.pt"
    proc = torchrun(["tests/dist_step.py", str(out), str(update_freq)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = torch.load(out)
    ddp_state, reduced = saved["state"], saved["reduced_buckets"]
    assert reduced and sorted(reduced) == sorted(set(reduced)), reduced
    model = dist_step.model_for_step()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    shares = [dist_step.split(dist_step.fixed_pairs(), rank, 2, update_freq) for rank in range(2)]
    union = [shares[0][i] + shares[1][i] for i in range(update_freq)]  # micro-batch i of every rank
    dist_step.one_step(model, union)
    single = model.state_dict()
    changed = [k for k in single if not torch.equal(single[k], before[k])]
    assert changed  # the step did something
    for key in single:
        assert torch.allclose(ddp_state[key], single[key], atol=1e-6), key


def test_resume_under_world_size_two(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = torchrun(
        [
            "train.py",
            "--config",
            "configs/demo/sinusoidal.yaml",
            *with_sets(tiny_overrides(run_dir, tmp_path / "cache", steps=4), "training.validate_every_steps=2"),
        ]
    )
    assert first.returncode == 0, first.stderr[-3000:]
    # (torchrun would take `--run` for its own --run-path: resume with --config ... --resume)
    second = torchrun(
        [
            "train.py",
            "--config",
            "configs/demo/sinusoidal.yaml",
            "--resume",
            *tiny_overrides(run_dir, tmp_path / "cache", steps=6),
        ]
    )
    assert second.returncode == 0, second.stderr[-3000:]
    records = read_jsonl(run_dir / "metrics.jsonl")
    starts = [r for r in records if r["event"] == "start"]
    assert [(s["step"], s["world_size"]) for s in starts] == [(0, 2), (4, 2)]
    assert [r["step"] for r in records if r["event"] == "end"] == [4, 6]
    assert [r["step"] for r in records if r["event"] == "valid"] == [2, 4, 6]  # rank 0 alone logs
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("last_*.pt")) == [
        "last_checkpoint_4.pt",
        "last_checkpoint_6.pt",
    ]
