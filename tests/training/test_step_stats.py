"""What training steps hand to logging (training/step_stats.py): sums kept on the device and read
once per interval as token-weighted means, a non-finite loss found at the read (training diverged),
the last window's loss for the run's record, and a resume restoring the unread interval."""

from __future__ import annotations

import pytest
import torch

from training.step_stats import StepStats


def step(stats: StepStats, loss: float, grad: float, tokens: int, padded: int = 0) -> None:
    stats.add(torch.tensor(loss), torch.tensor(grad), tokens, padded)


def test_an_interval_reads_token_weighted_means_and_starts_again() -> None:
    stats = StepStats("cpu", window=2)
    step(stats, 30.0, 1.0, 10, 2)
    step(stats, 10.0, 3.0, 10, 0)
    assert stats.read(step=2) == {"loss": 2.0, "grad_norm": 2.0, "tokens": 20, "padded": 2, "steps": 2}
    step(stats, 5.0, 1.0, 5)
    assert stats.read(step=3)["loss"] == 1.0  # the new interval alone
    assert stats.final_loss() == pytest.approx(15.0 / 15)  # the last two steps: (10 + 5) / (10 + 5)


def test_a_non_finite_loss_is_found_at_the_read() -> None:
    stats = StepStats("cpu", window=4)
    step(stats, 2.0, 1.0, 4)
    step(stats, float("nan"), 1.0, 4)
    with pytest.raises(FloatingPointError, match="not finite at 1 of the 2 steps up to step 7"):
        stats.check_finite(step=7)
    with pytest.raises(FloatingPointError):
        stats.read(step=7)


def test_a_resume_restores_the_unread_interval_and_a_smaller_window_keeps_the_newest() -> None:
    stats = StepStats("cpu", window=3)
    for loss, tokens in ((3.0, 3), (6.0, 3), (9.0, 3)):
        step(stats, loss, 1.0, tokens)
    resumed = StepStats("cpu", window=2)
    resumed.load_state_dict(stats.state_dict())
    assert resumed.final_loss() == pytest.approx((6.0 + 9.0) / 6)  # the newest two of the three
    assert resumed.read(step=3)["loss"] == pytest.approx(18.0 / 9)
