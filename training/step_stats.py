"""What training steps hand to logging, kept on the device between log intervals.

A training step never reads a number back from the GPU: reading one (`float(loss)`, `int(t.sum())`,
`bool(torch.isfinite(x))`) stops the CPU until the GPU has caught up, so it could not queue the
next step's kernels meanwhile. The step adds its summed loss and gradient norm to device tensors
here (token counts come from the batch lists, on the host); the training log reads them once per
interval (`read`), and a non-finite loss is found there, or at validation, at the latest.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


class StepStats:
    """Sums since the last read: loss, gradient norm and non-finite losses on the device; target
    tokens, padded target positions and steps on the host. The last `window` steps' losses and
    tokens are kept too (the run's final training loss)."""

    def __init__(self, device: torch.device | str, window: int) -> None:
        device = torch.device(device)
        self.dtype = torch.float32 if device.type == "mps" else torch.float64  # no float64 on MPS
        self.sums = torch.zeros(3, dtype=self.dtype, device=device)  # loss, grad norm, non-finite losses
        self.recent_loss = torch.zeros(max(1, window), dtype=self.dtype, device=device)
        self.recent_tokens = [0] * max(1, window)
        self.tokens = self.padded = self.steps = self.total_steps = 0

    def add(self, loss_sum: Tensor, grad_norm: Tensor, tokens: int, padded: int) -> None:
        """One optimizer update: its summed token loss and gradient norm (device scalars, not read)."""
        loss_sum = loss_sum.detach().to(self.dtype)
        finite = torch.isfinite(loss_sum)
        self.sums += torch.stack(
            [torch.where(finite, loss_sum, 0.0), grad_norm.detach().to(self.dtype), (~finite).to(self.dtype)]
        )
        slot = self.total_steps % self.recent_loss.numel()
        self.recent_loss[slot] = loss_sum  # a device copy, no read
        self.recent_tokens[slot] = tokens
        self.tokens, self.padded = self.tokens + tokens, self.padded + padded
        self.steps, self.total_steps = self.steps + 1, self.total_steps + 1

    def read(self, step: int) -> dict:
        """The interval's mean token loss and gradient norm, tokens, padding and steps (one read
        from the device), and start a new interval. FloatingPointError (training diverged, exit 3)
        if a loss of the interval was not finite."""
        loss, grad_norm, non_finite = self.sums.tolist()
        self._refuse(non_finite, step)
        out = {
            "loss": loss / max(1, self.tokens),
            "grad_norm": grad_norm / max(1, self.steps),
            "tokens": self.tokens,
            "padded": self.padded,
            "steps": self.steps,
        }
        self.sums.zero_()
        self.tokens = self.padded = self.steps = 0
        return out

    def check_finite(self, step: int) -> None:
        """FloatingPointError if a loss since the last read was not finite (one read of one number:
        before a checkpoint is written)."""
        self._refuse(float(self.sums[2]), step)

    def _refuse(self, non_finite: float, step: int) -> None:
        if non_finite:
            raise FloatingPointError(
                f"the loss was not finite at {int(non_finite)} of the {self.steps} steps up to step {step}"
            )

    def final_loss(self) -> Optional[float]:
        """Mean token loss over the last `window` steps (None before any)."""
        n = min(self.total_steps, self.recent_loss.numel())
        if not n:
            return None
        return float(self.recent_loss[:n].sum()) / max(1, sum(self.recent_tokens[:n]))

    def state_dict(self) -> dict:
        """The unread interval and the recent window as plain numbers (reads the device)."""
        return {
            "sums": self.sums.tolist(),
            "recent_loss": self.recent_loss.tolist(),
            "recent_tokens": list(self.recent_tokens),
            "tokens": self.tokens,
            "padded": self.padded,
            "steps": self.steps,
            "total_steps": self.total_steps,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` saved; a resume may change training.log_every (the window's
        size): the newest steps that fit are kept, in their order."""
        self.sums.copy_(torch.tensor(state["sums"], dtype=self.dtype))
        self.tokens, self.padded, self.steps = state["tokens"], state["padded"], state["steps"]
        total, old_size, size = state["total_steps"], len(state["recent_loss"]), self.recent_loss.numel()
        kept = min(total, old_size, size)
        self.recent_loss.zero_()
        self.recent_tokens = [0] * size
        for step in range(total - kept, total):  # ring positions: step % size
            self.recent_loss[step % size] = state["recent_loss"][step % old_size]
            self.recent_tokens[step % size] = state["recent_tokens"][step % old_size]
        self.total_steps = total  # (slots of steps not kept stay 0: they add nothing to final_loss)
