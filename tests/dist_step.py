"""Helper for test_distributed.py, launched by torchrun: one training step of the real train step
(`training.engine.create_trainer`) under DistributedDataParallel, each rank on its half of a batch."""

from __future__ import annotations

import sys
from pathlib import Path

import ignite.distributed as idist
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data.pipeline import Collator  # noqa: E402
from helpers import tiny_model  # noqa: E402
from training.engine import TokenLoss, create_trainer  # noqa: E402
from training.step_stats import StepStats  # noqa: E402


def model_for_step():
    """The model both sides of the comparison train: the torchrun ranks and the single process."""
    return tiny_model("rope", vocab=30, d_model=16, heads=2, layers=1, ffn_dim=32).train()


def fixed_pairs() -> list[tuple[list[int], list[int]]]:
    g = torch.Generator().manual_seed(1)
    lengths = [3, 7, 5, 2, 6, 4, 8, 3]
    return [(torch.randint(4, 30, (n,), generator=g).tolist(), torch.randint(4, 30, (n + 1,), generator=g).tolist())
            for n in lengths]


def one_step(model, batches: list[list[tuple[list[int], list[int]]]], world_size: int = 1) -> None:
    """One optimizer update accumulated over `batches` (update_freq = len(batches)); with several
    processes the loss is wrapped in DistributedDataParallel, as train.py does."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    loss = TokenLoss(model, pad_id=0, label_smoothing=0.1)
    trainer = create_trainer(idist.auto_model(loss) if world_size > 1 else loss, optimizer, scheduler,
                             StepStats("cpu", 1), pad_id=0, device=torch.device("cpu"), world_size=world_size)
    trainer.run([[Collator(0, 2, 3)(pairs) for pairs in batches]], max_epochs=1)


def split(pairs: list, rank: int, world: int, update_freq: int) -> list[list]:
    """Rank `rank`'s share of `pairs`, cut into `update_freq` consecutive micro-batches."""
    mine = pairs[rank::world]
    size = len(mine) // update_freq
    return [mine[i * size: (i + 1) * size] for i in range(update_freq)]


def worker(local_rank: int, out: str, update_freq: int) -> None:
    rank, world = idist.get_rank(), idist.get_world_size()
    model = model_for_step()
    one_step(model, split(fixed_pairs(), rank, world, update_freq), world)
    if rank == 0:
        torch.save(model.state_dict(), out)


if __name__ == "__main__":
    with idist.Parallel(backend="gloo") as parallel:
        parallel.run(worker, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
