"""The optimizer, and learning-rate schedules as a factor of the peak `lr` evaluated at every update."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def warmup_exponential(t: int, warmup: int, hold: int, decay: float) -> float:
    """(t+1)/(warmup+1) while warming up, 1.0 for `hold` units, then exp(-decay * (t - warmup - hold)).

    With t = epoch, warmup=6, hold=1, decay=0.35 this is the report's schedule:
    (e+1)/7 for e = 0..5, 1.0 at e = 6, then exp(-0.35 (e - 7)).
    """
    if t < warmup:
        return (t + 1) / (warmup + 1)
    return math.exp(-decay * max(0, t - warmup - hold))


def inverse_sqrt(t: int, warmup: int) -> float:
    """Vaswani et al.'s schedule normalised to peak 1.0 at t = warmup: linear up, then 1/sqrt(t)."""
    step = t + 1
    warmup = max(1, warmup)
    return min(step / warmup, math.sqrt(warmup / step))


def schedule_factor(cfg, steps_per_epoch: int) -> Callable[[int], float]:
    """Builder: a function of the optimizer step -> LR factor, from the `training.schedule` config."""

    def unit(step: int) -> int:
        return step // max(1, steps_per_epoch) if cfg.unit == "epoch" else step

    if cfg.name == "warmup_exponential":

        def factor(step: int) -> float:
            return max(cfg.min_factor, warmup_exponential(unit(step), cfg.warmup, cfg.hold, cfg.decay))
    elif cfg.name == "inverse_sqrt":

        def factor(step: int) -> float:
            return max(cfg.min_factor, inverse_sqrt(unit(step), cfg.warmup))
    elif cfg.name == "constant":

        def factor(step: int) -> float:
            return 1.0
    else:
        raise ValueError(f"unknown schedule {cfg.name!r}; valid: warmup_exponential, inverse_sqrt, constant")
    return factor


def build_optimizer(model, cfg) -> Optimizer:
    """Adam or AdamW over all parameters, from the `training` config section: the fused kernel
    where the parameters' device has one (one launch per update instead of several per tensor, and
    no step counter read back from the device), else the multi-tensor (foreach) one."""
    opt_cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    kwargs = dict(lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    try:
        return opt_cls(model.parameters(), fused=True, **kwargs)
    except RuntimeError:  # "fused=True requires all the params to be ... tensors of supported devices"
        return opt_cls(model.parameters(), foreach=True, **kwargs)


def keep_implementation(optimizer: Optimizer) -> None:
    """After `load_state_dict`: the kernel build_optimizer chose, not the checkpoint's (a checkpoint of
    an earlier release says fused=None, which would break a fused optimizer's gradient-scaler step)."""
    for group in optimizer.param_groups:
        group["fused"], group["foreach"] = optimizer.defaults["fused"], optimizer.defaults["foreach"]


def build_scheduler(optimizer: Optimizer, cfg, steps_per_epoch: int) -> LambdaLR:
    """A LambdaLR stepped once per update; its state (the step count) is saved in checkpoints."""
    return LambdaLR(optimizer, schedule_factor(cfg, steps_per_epoch))


def set_peak_lr(scheduler: LambdaLR, lr: float) -> None:
    """Give a (resumed) schedule a new peak LR: the step count and the factors stay, the current
    and every later learning rate become factor x `lr`."""
    scheduler.base_lrs = [lr] * len(scheduler.base_lrs)
    for group, factor in zip(scheduler.optimizer.param_groups, scheduler.lr_lambdas):
        group["initial_lr"] = lr
        group["lr"] = lr * factor(scheduler.last_epoch)
