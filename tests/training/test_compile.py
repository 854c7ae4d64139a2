"""training.compile (issue: GPU training at the hardware's pace): the compiled model trains as the
eager one. Both train from the same weights on the same batches of four shapes: every step's loss
and the weights after the last step agree within the precision's tolerance, and one compilation
serves all four shapes. Runs on the CPU (fp32, Inductor's C++ backend) and, where torch sees a
GPU, on it too (bf16 autocast, Triton), also with training.cuda_graphs (and then no graph skipped)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from helpers import tiny_model

from data.pipeline import Collator, UpdateBatches
from training.engine import TokenLoss, compile_for_training, create_trainer
from training.schedules import build_optimizer
from training.step_stats import StepStats

LR = 1e-4
# (device, training.cuda_graphs): CUDA graphs only where there is a GPU (Inductor ignores them on a CPU)
CASES = [
    ("cpu", False),
    pytest.param("cuda", False, marks=pytest.mark.gpu),
    pytest.param("cuda", True, marks=pytest.mark.gpu),
]


def batches() -> list[dict]:
    g = torch.Generator().manual_seed(0)
    out = []
    # four shapes: the first batch's source and decoder input are equally long, the others' not; the
    # last is longer than attend's CPU short-query path (SHORT_QUERY = 16)
    for rows, src_len, tgt_len in ((4, 6, 5), (3, 9, 10), (5, 7, 8), (2, 18, 19)):
        pairs = [
            (
                torch.randint(4, 50, (src_len,), generator=g).tolist(),
                torch.randint(4, 50, (tgt_len,), generator=g).tolist(),
            )
            for _ in range(rows)
        ]
        out.append(Collator(0, 2, 3)(pairs))
    return out


def train(model, compiled: bool, device: str, precision: str, cuda_graphs: bool = False) -> list[float]:
    optimizer = build_optimizer(
        model, SimpleNamespace(optimizer="adam", lr=LR, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0)
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    stats = StepStats(device, window=1)
    loss = TokenLoss(model, pad_id=0, label_smoothing=0.1, precision=precision)  # as the demo configs
    trainer = create_trainer(
        compile_for_training(loss, cuda_graphs) if compiled else loss,
        optimizer,
        scheduler,
        stats,
        pad_id=0,
        device=torch.device(device),
        clip_grad_norm=1.0,
        cuda_graphs=cuda_graphs,
    )
    losses = []
    for batch in batches():
        trainer.run(UpdateBatches([batch], 1), max_epochs=1)
        losses.append(stats.read(len(losses) + 1)["loss"])
    return losses


@pytest.fixture
def keeps_duck_shape():
    """compile_for_training turns torch's duck sizing off for the process: put it back after the test
    (by hand: monkeypatch's undo deletes the entry from torch's config module)."""
    import torch.fx.experimental._config as fx_config

    saved = fx_config.use_duck_shape
    yield
    fx_config.use_duck_shape = saved


@pytest.mark.slow
@pytest.mark.parametrize("device, cuda_graphs", CASES)
def test_a_compiled_model_trains_as_the_eager_one(device: str, cuda_graphs: bool, keeps_duck_shape) -> None:
    precision = "bf16" if device == "cuda" else "fp32"
    eager = tiny_model("sinusoidal", seed=1, layers=1).to(device).train()
    compiled = copy.deepcopy(eager)
    start = torch.cat([p.detach().flatten() for p in eager.parameters()])
    torch._dynamo.reset()
    expected = train(eager, False, device, precision)
    counters = torch._dynamo.utils.counters
    counters.clear()
    got = train(compiled, True, device, precision, cuda_graphs)
    assert counters["stats"]["unique_graphs"] == 1, "compiled again for a new batch shape"
    assert not counters["inductor"]["cudagraph_skips"], "CUDA graphs were skipped"
    tolerance = 2e-2 if precision == "bf16" else 1e-4
    assert got == pytest.approx(expected, rel=tolerance), (got, expected)
    # The updates agree: Adam moves each weight by about LR per step whatever the gradient's size,
    # so the weights' total change is compared element by element (a near-zero gradient whose
    # sign differs may flip a few of them; a step that did not train, or trained wrongly, moves
    # most of them elsewhere).
    moved_eager = torch.cat([p.detach().flatten() for p in eager.parameters()]) - start
    moved_compiled = torch.cat([p.detach().flatten() for p in compiled.parameters()]) - start
    assert float(moved_eager.abs().mean()) > LR / 2  # it trained
    agree = (moved_compiled - moved_eager).abs() <= (0.25 if precision == "bf16" else 0.01) * LR
    assert float(agree.float().mean()) >= (0.9 if precision == "bf16" else 0.99), float(agree.float().mean())


def test_cuda_graphs_under_several_processes_are_refused_before_anything_is_made(tmp_path, monkeypatch) -> None:
    from commands.train import train
    from settings.config import ConfigError

    monkeypatch.setenv("WORLD_SIZE", "2")
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match="set training.cuda_graphs: false with several processes"):
        train(
            config="configs/demo/sinusoidal.yaml",
            overrides=[f"run_dir={run_dir}", "training.compile=true", "training.cuda_graphs=true"],
        )
    assert not run_dir.exists()


def test_the_loss_is_compiled_with_the_model() -> None:
    """What training.compile compiles is TokenLoss: the model's forward and its cross-entropy (label
    smoothed) in one graph, without a break, so that CUDA graphs record the loss too."""
    import torch.nn.functional as F

    batch = batches()[1]
    loss = TokenLoss(tiny_model("sinusoidal", seed=1, layers=1).train(), pad_id=0, label_smoothing=0.1)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(loss)(batch["src"], batch["tgt_in"], batch["tgt_out"])
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation.break_reasons
    assert F.cross_entropy in {node.target for graph in explanation.graphs for node in graph.graph.nodes}
