"""A training step reads nothing back from the device (issue: GPU training at the hardware's pace).

Every read of a tensor value into Python (`aten._local_scalar_dense`) stops a GPU's host until the
device catches up; the training log reads the step's sums once per interval instead
(training/step_stats.py). Counted with a TorchDispatchMode, which works on a CPU: with the fused
optimizer (no step counters read back) the count between log intervals is zero, for every
registered encoding.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from helpers import encoding_cases, tiny_model
from ignite.engine import Events

from benchmarks.host_syncs import CountHostSyncs
from data.pipeline import Collator, UpdateBatches
from training.engine import TokenLoss, create_trainer
from training.schedules import build_optimizer
from training.step_stats import StepStats

OPTIMIZER = SimpleNamespace(optimizer="adam", lr=1e-3, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0)


def batches(count: int, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        pairs = [
            (
                torch.randint(4, 50, (int(n),), generator=g).tolist(),
                torch.randint(4, 50, (int(n) + 1,), generator=g).tolist(),
            )
            for n in torch.randint(2, 9, (4,), generator=g)
        ]
        out.append(Collator(0, 2, 3)(pairs))
    return out


def trainer_for(model, stats: StepStats, clip: float | None = 1.0, update_freq: int = 1):
    optimizer = build_optimizer(model, OPTIMIZER)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return create_trainer(
        TokenLoss(model, pad_id=0, label_smoothing=0.1),
        optimizer,
        scheduler,
        stats,
        pad_id=0,
        device=torch.device("cpu"),
        clip_grad_norm=clip,
    )


@pytest.mark.parametrize("name, options", encoding_cases())
def test_a_training_step_reads_nothing_back_from_the_device(name, options):
    model = tiny_model(name, seed=1, **options).train()
    stats = StepStats("cpu", window=4)
    trainer = trainer_for(model, stats)
    trainer.run(UpdateBatches(batches(3), 1), max_epochs=1)  # the first steps (lazy initialisation) are not counted
    counted = UpdateBatches(batches(3, seed=1), 1)  # made outside the count: the data loader's work
    with CountHostSyncs() as syncs:
        trainer.run(counted, max_epochs=1)
    assert syncs.count == 0, f"{name}: {syncs.count} host syncs in 3 training steps, at {sorted(set(syncs.where))}"
    got = stats.read(6)  # the log interval: one read
    assert got["steps"] == 6 and math.isfinite(got["loss"]) and got["loss"] > 0 and got["grad_norm"] > 0


def test_the_interval_read_equals_the_steps_own_losses():
    from training.engine import sequence_loss

    model = tiny_model("sinusoidal", seed=2).train()
    stats = StepStats("cpu", window=2)
    trainer = trainer_for(model, stats, clip=None)
    data = batches(3, seed=2)
    losses = []
    snapshots = []  # the weights before each step: its loss re-derived from them
    trainer.add_event_handler(
        Events.ITERATION_STARTED, lambda e: snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
    )
    trainer.run(UpdateBatches(data, 1), max_epochs=1)
    reference = tiny_model("sinusoidal", seed=2).train()
    for state, batch in zip(snapshots, data):
        reference.load_state_dict(state)
        torch.manual_seed(0)
        with torch.no_grad():
            reference.eval()
            losses.append(
                (
                    float(sequence_loss(reference(batch["src"], batch["tgt_in"]), batch["tgt_out"], 0, 0.1)),
                    batch["ntokens"],
                )
            )
    got = stats.read(3)
    assert got["tokens"] == sum(n for _, n in losses) == sum(int(b["tgt_out"].ne(0).sum()) for b in data)
    assert got["padded"] == sum(b["tgt_out"].numel() for b in data) and got["steps"] == 3
    # dropout 0 (tiny_model): training-mode losses equal eval-mode ones
    assert got["loss"] == pytest.approx(sum(loss for loss, _ in losses) / got["tokens"], rel=1e-5)
    assert stats.final_loss() == pytest.approx(
        sum(loss for loss, _ in losses[-2:]) / sum(n for _, n in losses[-2:]), rel=1e-5
    )
    assert stats.read(3)["steps"] == 0  # a new interval


def test_a_non_finite_loss_is_found_at_the_next_read_or_check():
    stats = StepStats("cpu", window=2)
    stats.add(torch.tensor(2.0), torch.tensor(1.0), 4, 5)
    stats.add(torch.tensor(float("nan")), torch.tensor(1.0), 4, 5)
    with pytest.raises(FloatingPointError, match="not finite at 1 of the 2 steps up to step 7"):
        stats.check_finite(7)
    with pytest.raises(FloatingPointError, match="not finite"):
        stats.read(7)
    again = StepStats("cpu", window=2)
    again.load_state_dict(stats.state_dict())
    with pytest.raises(FloatingPointError):
        again.check_finite(7)


def test_an_optimizer_state_of_an_earlier_release_keeps_the_fused_kernel():
    """A checkpoint written with the unfused Adam (fused=None in its groups) resumes on the fused
    one; without keep_implementation an fp16 step with a gradient scaler fails its assertion."""
    from training.schedules import keep_implementation

    model = tiny_model("sinusoidal", seed=5).train()
    old = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = batches(1)[0]
    model(batch["src"], batch["tgt_in"]).sum().backward()
    old.step()
    fused = build_optimizer(model, OPTIMIZER)
    fused.load_state_dict(old.state_dict())
    assert fused.param_groups[0]["fused"] is None  # what the checkpoint said
    keep_implementation(fused)
    assert fused.param_groups[0]["fused"] is True
    scaler = torch.amp.GradScaler("cpu")
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(batch["src"], batch["tgt_in"]).float().sum()
    scaler.scale(loss).backward()
    scaler.step(fused)
    scaler.update()


@pytest.mark.parametrize("old_window, new_window", [(4, 4), (4, 2), (2, 5), (3, 7)])
def test_step_stats_resume_across_a_changed_log_interval(old_window: int, new_window: int) -> None:
    """StepStats travels in checkpoints; a resume may change training.log_every (the window's size):
    the interval's sums come back whole, and final_loss is the mean over the newest steps both
    windows hold, as a run with the new window would have it."""
    from training.step_stats import StepStats

    losses, tokens = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0], [1, 2, 3, 4, 5, 6]
    before = StepStats("cpu", old_window)
    for loss, count in zip(losses, tokens):
        before.add(torch.tensor(loss * count), torch.tensor(1.0), count, 0)
    after = StepStats("cpu", new_window)
    after.load_state_dict(before.state_dict())
    kept = min(old_window, new_window)
    expected = sum(loss * c for loss, c in zip(losses[-kept:], tokens[-kept:])) / sum(tokens[-kept:])
    assert after.final_loss() == pytest.approx(expected)
    assert after.read(6)["loss"] == pytest.approx(before.read(6)["loss"])
    after.add(torch.tensor(14.0 * 7), torch.tensor(1.0), 7, 0)  # the ring goes on from the right slot
    window = [*zip(losses, tokens), (14.0, 7)][-min(new_window, kept + 1) :]
    assert after.final_loss() == pytest.approx(sum(loss * c for loss, c in window) / sum(c for _, c in window))
