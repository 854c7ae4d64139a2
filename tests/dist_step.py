"""Helper for test_distributed.py, launched by torchrun: one training step of the real train step
(`training.engine.create_trainer`) under DistributedDataParallel, each rank on its half of a batch."""

from __future__ import annotations

import sys
from pathlib import Path

import ignite.distributed as idist
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import tiny_model  # noqa: E402

from data.pipeline import Collator  # noqa: E402
from training.engine import TokenLoss, create_trainer  # noqa: E402
from training.step_stats import StepStats  # noqa: E402


def model_for_step():
    """The model both sides of the comparison train: the torchrun ranks and the single process."""
    return tiny_model("rope", vocab=30, d_model=16, heads=2, layers=1, ffn_dim=32).train()


def fixed_pairs() -> list[tuple[list[int], list[int]]]:
    g = torch.Generator().manual_seed(1)
    lengths = [3, 7, 5, 2, 6, 4, 8, 3]
    return [
        (torch.randint(4, 30, (n,), generator=g).tolist(), torch.randint(4, 30, (n + 1,), generator=g).tolist())
        for n in lengths
    ]


def one_step(model, batches: list[list[tuple[list[int], list[int]]]], world_size: int = 1) -> list[int]:
    """One optimizer update accumulated over `batches` (update_freq = len(batches)); with several
    processes the loss is wrapped in DistributedDataParallel, as train.py does. Returns the index
    of each gradient bucket DDP all-reduced, once per all-reduce."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    loss = TokenLoss(model, pad_id=0, label_smoothing=0.1)
    reduced: list[int] = []
    if world_size > 1:
        loss = idist.auto_model(loss)

        def recorded(state, bucket):
            reduced.append(bucket.index())
            return allreduce_hook(state, bucket)

        loss.register_comm_hook(None, recorded)
    trainer = create_trainer(
        loss, optimizer, scheduler, StepStats("cpu", 1), pad_id=0, device=torch.device("cpu"), world_size=world_size
    )
    trainer.run([[Collator(0, 2, 3)(pairs) for pairs in batches]], max_epochs=1)
    return reduced


def split(pairs: list, rank: int, world: int, update_freq: int) -> list[list]:
    """Rank `rank`'s share of `pairs`, cut into `update_freq` consecutive micro-batches."""
    mine = pairs[rank::world]
    size = len(mine) // update_freq
    return [mine[i * size : (i + 1) * size] for i in range(update_freq)]


def worker(local_rank: int, out: str, update_freq: int) -> None:
    rank, world = idist.get_rank(), idist.get_world_size()
    model = model_for_step()
    reduced = one_step(model, split(fixed_pairs(), rank, world, update_freq), world)
    if rank == 0:
        torch.save({"state": model.state_dict(), "reduced_buckets": reduced}, out)


if __name__ == "__main__":
    with idist.Parallel(backend="gloo") as parallel:
        parallel.run(worker, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
