"""LR schedules (training/schedules.py): the report's warmup + exponential decay, inverse sqrt, floors."""

from __future__ import annotations

import math

import pytest
import torch

from settings.config import ScheduleConfig
from training.schedules import build_scheduler, inverse_sqrt, schedule_factor, warmup_exponential


def report_schedule(epoch: int) -> float:
    """The report's epoch-based factor, written out from the original design notes
    (../shared/docs/DESIGN.md): (e+1)/7 for e = 0..5, 1.0 at e = 6, then exp(-0.35 (e-7))."""
    if epoch <= 5:
        return (epoch + 1) / 7
    if epoch == 6:
        return 1.0
    return math.exp(-0.35 * (epoch - 7))


def test_warmup_exponential_is_the_report_schedule():
    for e in range(6):
        assert warmup_exponential(e, 6, 1, 0.35) == pytest.approx((e + 1) / 7)
    assert warmup_exponential(6, 6, 1, 0.35) == 1.0
    assert warmup_exponential(7, 6, 1, 0.35) == 1.0
    for e in range(8, 25):
        assert warmup_exponential(e, 6, 1, 0.35) == pytest.approx(math.exp(-0.35 * (e - 7)))
    for e in range(25):
        assert warmup_exponential(e, 6, 1, 0.35) == pytest.approx(report_schedule(e))


def test_schedule_factor_epoch_unit_is_constant_within_an_epoch():
    cfg = ScheduleConfig(name="warmup_exponential", unit="epoch", warmup=6, hold=1, decay=0.35)
    steps_per_epoch = 5
    factor = schedule_factor(cfg, steps_per_epoch)
    for step in range(20 * steps_per_epoch):
        assert factor(step) == pytest.approx(report_schedule(step // steps_per_epoch))
    for epoch in range(20):
        values = {factor(epoch * steps_per_epoch + k) for k in range(steps_per_epoch)}
        assert len(values) == 1


def test_schedule_factor_step_unit_and_floor():
    cfg = ScheduleConfig(name="warmup_exponential", unit="step", warmup=6, hold=1, decay=0.35, min_factor=0.1)
    factor = schedule_factor(cfg, steps_per_epoch=1000)  # ignored for unit=step
    assert factor(0) == pytest.approx(1 / 7) and factor(6) == 1.0
    assert factor(8) == pytest.approx(math.exp(-0.35))
    assert factor(1000) == pytest.approx(0.1)  # never below min_factor
    constant = schedule_factor(ScheduleConfig(name="constant"), 10)
    assert [constant(s) for s in (0, 7, 10_000)] == [1.0, 1.0, 1.0]


def test_inverse_sqrt_peaks_at_one_then_decays():
    warmup = 400
    values = [inverse_sqrt(t, warmup) for t in range(4000)]
    assert max(values) == pytest.approx(1.0)
    assert values.index(max(values)) == warmup - 1
    for t in range(warmup - 1):
        assert values[t] == pytest.approx((t + 1) / warmup)
    for t in range(warmup - 1, 4000, 37):
        assert values[t] == pytest.approx(math.sqrt(warmup / (t + 1)))
    # Vaswani et al.: proportional to d^-0.5 * min(step^-0.5, step * warmup^-1.5), normalised to peak 1.
    for step in (1, 100, 400, 1600, 3999):
        vaswani = min(step**-0.5, step * warmup**-1.5) / warmup**-0.5
        assert inverse_sqrt(step - 1, warmup) == pytest.approx(vaswani)


@pytest.mark.parametrize(
    "cfg",
    [
        ScheduleConfig(name="warmup_exponential", unit="epoch", warmup=6, hold=1, decay=0.35),
        ScheduleConfig(name="inverse_sqrt", unit="step", warmup=4),
    ],
)
def test_build_scheduler_sets_lr_to_base_times_factor(cfg):
    base_lr, steps_per_epoch = 3e-4, 3
    param = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.Adam([param], lr=base_lr, betas=(0.9, 0.98), eps=1e-8)
    scheduler = build_scheduler(optimizer, cfg, steps_per_epoch)
    factor = schedule_factor(cfg, steps_per_epoch)
    for k in range(40):
        # After k updates, the (k+1)-th update runs at base * factor(k).
        assert optimizer.param_groups[0]["lr"] == pytest.approx(base_lr * factor(k))
        param.grad = torch.ones(2)
        optimizer.step()
        scheduler.step()
    # The state survives a checkpoint round trip.
    fresh = build_scheduler(torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=base_lr), cfg, steps_per_epoch)
    fresh.load_state_dict(scheduler.state_dict())
    assert fresh.get_last_lr()[0] == pytest.approx(base_lr * factor(40))
