"""The train step (training/engine.py) on CPU: mixed precision (bf16 autocast, fp16 with a grad scaler) and
gradient accumulation through the real step; CUDA attention off the cuDNN backend."""

from __future__ import annotations

import torch
from helpers import tiny_model
from ignite.engine import Events

from data.pipeline import Collator, UpdateBatches
from training.engine import TokenLoss, create_trainer
from training.step_stats import StepStats


def batch() -> dict:
    g = torch.Generator().manual_seed(0)
    pairs = [
        (torch.randint(4, 40, (n,), generator=g).tolist(), torch.randint(4, 40, (n,), generator=g).tolist())
        for n in (5, 7, 4, 6)
    ]
    return Collator(0, 2, 3)(pairs)


def train(
    precision: str, steps: int, update_freq: int = 1, batches=None, sgd: bool = False
) -> tuple[list[float], torch.nn.Module]:
    model = tiny_model(vocab=40, layers=1).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5) if sgd else torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu") if precision == "fp16" else None
    stats = StepStats("cpu", 1)
    trainer = create_trainer(
        TokenLoss(model, pad_id=0, precision=precision),
        optimizer,
        scheduler,
        stats,
        pad_id=0,
        device=torch.device("cpu"),
        clip_grad_norm=1.0,
        scaler=scaler,
    )
    losses: list[float] = []
    trainer.add_event_handler(
        Events.ITERATION_COMPLETED, lambda e: losses.append(stats.read(e.state.iteration)["loss"])
    )
    trainer.run(UpdateBatches(batches or [batch()] * steps, update_freq), max_epochs=1)
    return losses, model


def test_bf16_autocast_training_runs_and_learns_on_cpu() -> None:
    losses, _ = train("bf16", 30)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.7 * losses[0]


def test_fp16_with_grad_scaler_runs_on_cpu() -> None:
    losses, _ = train("fp16", 12)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]


def test_accumulating_two_parts_equals_one_update_on_both() -> None:
    """update_freq=2 on two parts of unequal token counts gives the parameters of one update on the
    whole: the loss is normalised by the tokens of the whole update, not averaged per batch."""
    collate = Collator(0, 2, 3)
    pairs = [([4, 5, 6], [7, 8]), ([9, 10, 11], [12, 13, 5, 6, 7]), ([5, 6, 7], [8, 9]), ([10, 4, 6], [11, 7])]
    halves = [collate(pairs[:1]), collate(pairs[1:])]
    whole = collate(pairs)
    _, accumulated = train("fp32", 2, update_freq=2, batches=halves, sgd=True)
    _, single = train("fp32", 1, update_freq=1, batches=[whole], sgd=True)
    for (name, a), b in zip(accumulated.state_dict().items(), single.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name
    assert not torch.equal(
        single.state_dict()["output_proj.weight"],
        tiny_model(vocab=40, layers=1).train().state_dict()["output_proj.weight"],
    )


def test_cuda_attention_skips_the_cudnn_backend() -> None:
    """cuDNN attention re-plans on every new batch shape (~0.4 s each on an H100): train.py,
    test.py and inference.py turn it off on cuda; the flash / efficient kernels stay on."""
    from utils.runtime import skip_cudnn_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        skip_cudnn_attention()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_a_packed_batch_trains_as_its_pairs_one_per_row() -> None:
    """training.pack_length through the real step: the packed batch's update equals the update on
    the same pairs one per row (fp32, SGD): the step hands the model which pair each token is."""
    from data.packing import PackingCollator, next_fit_rows

    pairs = [([4, 5, 6], [7, 8]), ([9, 10, 11], [12, 13, 5, 6, 7]), ([5, 6, 7], [8, 9]), ([10, 4, 6], [11, 7])]
    packed = PackingCollator(0, 2, 3, 12)(pairs)
    assert packed["src"].size(0) == 2  # two pairs a row
    rows = next_fit_rows([len(s) for s, _ in pairs], [len(t) + 1 for _, t in pairs], 12)
    alone = Collator(0, 2, 3)([pairs[n] for row in rows for n in row])
    packed_losses, packed_model = train("fp32", 1, batches=[packed], sgd=True)
    alone_losses, alone_model = train("fp32", 1, batches=[alone], sgd=True)
    assert abs(packed_losses[0] - alone_losses[0]) < 1e-5
    for p, q in zip(packed_model.parameters(), alone_model.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)
