"""Ignite engines: a short train step, an evaluator with token-level metrics, and the loss."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Optional

import torch
import torch.nn.functional as F
from ignite.engine import Engine
from ignite.metrics import Metric
from torch import Tensor, nn

from models.packing import Packing
from training.step_stats import StepStats
from utils.runtime import autocast


def sequence_loss(logits: Tensor, target: Tensor, pad_id: int, label_smoothing: float = 0.0) -> Tensor:
    """Summed token cross-entropy over non-pad targets. logits `[batch, len, vocab]`, target `[batch, len]`."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        target.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


class TokenLoss(nn.Module):
    """What one training forward computes: the model's teacher-forced logits, under the run's
    autocast, and their summed token cross-entropy (`sequence_loss`). One module, so that
    training.compile compiles the loss with the model in one graph (the fp32 cast and the
    log-softmax over the vocabulary become Inductor kernels instead of eager passes over the
    `[tokens, vocabulary]` logits) and training.cuda_graphs records it too. Its parameters are the
    model's: checkpoints keep the plain model."""

    def __init__(self, model: nn.Module, pad_id: int, label_smoothing: float = 0.0, precision: str = "fp32") -> None:
        super().__init__()
        self.model, self.pad_id, self.label_smoothing, self.precision = model, pad_id, label_smoothing, precision

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, packing: Optional[Packing] = None) -> Tensor:
        with autocast(self.precision, src.device):
            logits = self.model(src, tgt_in, packing)
        return sequence_loss(logits, tgt_out, self.pad_id, self.label_smoothing)


def compile_for_training(loss: TokenLoss | nn.Module, cuda_graphs: bool = False):
    """training.compile: torch.compile with symbolic batch size and lengths, so that one compilation
    serves every batch of two or more sentences (token-budget batches vary in both; torch
    specializes sizes 0 and 1, so a one-sentence batch compiles once more), and without duck
    sizing, which would tie a source length to an equal target length and compile again when
    they first differ (torch reads that setting from a global when it traces: it stays off for the
    rest of the process, which compiles nothing else).
    Inductor's mix-order reduction fusion is off: it is chosen by comparing a batch's size with a
    threshold, which on a GPU compiled the step again whenever a batch crossed it (seen on an H200,
    benchmarks/README.md). The checkpoint keeps the plain model.

    cuda_graphs (training.cuda_graphs; torch.compile's "reduce-overhead"): on a GPU each batch
    shape's forward and backward are recorded once as CUDA graphs and replayed, so the model and its
    loss cost no Python or per-kernel launches (clipping and the optimizer still run as usual);
    training.pad_to_multiple keeps the shapes few (data.pipeline.EpochBatchSampler), and a run may
    have more than Inductor's default warning limit of 8. Inductor ignores it on a CPU."""
    import torch._inductor.config as inductor_config
    import torch.fx.experimental._config as fx_config

    fx_config.use_duck_shape = False
    wanted = {"cudagraphs": cuda_graphs, "cudagraph_dynamic_shape_warn_limit": None, "mix_order_reduction": False}
    options = {f"triton.{k}": v for k, v in wanted.items() if hasattr(inductor_config.triton, k)}  # (older torch)
    return torch.compile(loss, dynamic=True, options=options)


def target_tokens(batch: dict, pad_id: int) -> int:
    """A batch's non-pad target tokens, from the host: the collator's count (data.pipeline.Collator),
    else counted on the batch before it is copied to the device."""
    return batch["ntokens"] if "ntokens" in batch else int(batch["tgt_out"].ne(pad_id).sum())


def apply_update(loss: nn.Module, optimizer, scheduler, scaler, clip_grad_norm: Optional[float]) -> Tensor:
    """Unscale (fp16), clip, step the optimizer and the LR schedule; returns the gradient norm
    before clipping (logged as train/grad_norm), left on the device."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    if clip_grad_norm:
        grad_norm = torch.nn.utils.clip_grad_norm_(loss.parameters(), clip_grad_norm)
    else:
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in loss.parameters() if p.grad is not None])
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    return grad_norm


def create_trainer(
    loss: TokenLoss | nn.Module,
    optimizer,
    scheduler,
    stats: StepStats,
    *,
    pad_id: int,
    device: torch.device,
    clip_grad_norm: Optional[float] = None,
    scaler: Optional["torch.amp.GradScaler"] = None,
    world_size: int = 1,
    cuda_graphs: bool = False,
) -> Engine:
    """Trainer engine over `loss` (a TokenLoss, or its DistributedDataParallel or torch.compile
    wrapper). One iteration = one optimizer update over a list of batches (`update_freq`
    of them, see `data.pipeline.UpdateBatches`): their gradients are accumulated, unscaled (fp16),
    clipped and applied, and the LR schedule advances one step. The summed token loss is divided
    by the target tokens of the whole update -- of *all* ranks' batches with several processes
    (DistributedDataParallel averages gradients over ranks) -- so an update equals one process
    on one batch holding them all. Between batches of an update a DistributedDataParallel model
    accumulates locally (`no_sync`): gradients are all-reduced once per update.

    The step reads nothing back from the device: its loss and gradient norm (before clipping) go
    to `stats` (training/step_stats.py), which the training log reads once per interval; the
    step returns its host-side token counts. With `cuda_graphs` (a loss compiled so) every step
    starts a new generation of graph replays: the previous step's outputs are no longer read."""

    def train_step(engine: Engine, batches: list[dict[str, Tensor]]) -> dict[str, Any]:
        loss.train()
        if cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        ntokens = sum(target_tokens(b, pad_id) for b in batches)
        padded = sum(b["tgt_out"].numel() for b in batches)
        moved = [
            [b[k].to(device, non_blocking=True) for k in ("src", "tgt_in", "tgt_out")]
            + ([Packing.on(b["packing"], device, non_blocking=True)] if "packing" in b else [])
            for b in batches
        ]  # packed batches (training.pack_length) carry which pair each token belongs to
        all_tokens: Tensor | int = ntokens
        if world_size > 1:  # the update's tokens over all ranks, left on the device
            import ignite.distributed as idist

            all_tokens = idist.all_reduce(torch.tensor(float(ntokens), device=device))
        total_loss = torch.zeros((), device=device)
        for i, inputs in enumerate(moved):
            last = i == len(moved) - 1
            accumulate = loss.no_sync() if not last and hasattr(loss, "no_sync") else contextlib.nullcontext()
            with accumulate:
                loss_sum = loss(*inputs)
                scaled = loss_sum * world_size / all_tokens
                (scaler.scale(scaled) if scaler is not None else scaled).backward()
            total_loss = total_loss + loss_sum.detach()
        grad_norm = apply_update(loss, optimizer, scheduler, scaler, clip_grad_norm)
        stats.add(total_loss, grad_norm, ntokens, padded)
        return {"ntokens": ntokens, "padded_tgt": padded}

    return Engine(train_step)


class TokenMetrics(Metric):
    """Validation loss (mean token NLL, no smoothing), perplexity and token accuracy, over non-pad targets."""

    def __init__(self, pad_id: int, device: str | torch.device = "cpu") -> None:
        self.pad_id = pad_id
        super().__init__(output_transform=lambda out: out, device=device)

    def reset(self) -> None:
        self._nll = 0.0
        self._tokens = 0
        self._correct = 0

    def update(self, output: tuple[Tensor, Tensor]) -> None:
        logits, target = output
        mask = target.ne(self.pad_id)
        self._nll += float(sequence_loss(logits, target, self.pad_id))
        self._tokens += int(mask.sum())
        self._correct += int((logits.argmax(-1).eq(target) & mask).sum())

    def compute(self) -> dict[str, float]:
        loss = self._nll / max(1, self._tokens)
        return {
            "valid_loss": loss,
            "valid_ppl": math.exp(min(loss, 50.0)),
            "valid_accuracy": self._correct / max(1, self._tokens),
        }


def create_evaluator(model, pad_id: int, device: torch.device) -> Engine:
    @torch.no_grad()
    def eval_step(engine: Engine, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        model.eval()
        src, tgt_in, tgt_out = (batch[k].to(device) for k in ("src", "tgt_in", "tgt_out"))
        return model(src, tgt_in), tgt_out

    evaluator = Engine(eval_step)
    TokenMetrics(pad_id).attach(evaluator, "token_metrics")
    return evaluator
