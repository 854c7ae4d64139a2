"""What a run logs to TensorBoard (training/tensorboard_log.py): a learned encoding's position table
reaches it as images."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_jsonl


@pytest.mark.slow
def test_learned_positional_tables_reach_tensorboard(trained_family_runs: dict[str, Path]) -> None:
    """At the end of training: each learned table as an image, and a learnable table in the projector."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = {}
    for name, run_dir in trained_family_runs.items():
        events = EventAccumulator(str(run_dir / "tb"), size_guidance={"images": 0})
        events.Reload()
        tags[name] = set(events.Tags()["images"])
        assert "attention/cross-attention" in tags[name]
    assert {"positions/encoder/table.weight", "positions/decoder/table.weight"} <= tags["learnable"]
    assert {"positions/encoder/bias_table.weight", "positions/decoder/bias_table.weight"} <= tags["t5_bias"]
    assert not {t for t in tags["fire"] | tags["xpos"] if t.startswith("positions/")}  # no tables: no table images
    projector = (trained_family_runs["learnable"] / "tb" / "projector_config.pbtxt").read_text()
    assert "positions_encoder" in projector and "positions_decoder" in projector
    assert not (trained_family_runs["t5_bias"] / "tb" / "projector_config.pbtxt").exists()


def test_tensorboard_events_hold_training_and_validation_scalars(trained_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(trained_run / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/lr", "valid/loss", "valid/accuracy", "valid/ppl", "valid/bleu"} <= tags
    assert [e.step for e in acc.Scalars("valid/loss")] == [3, 6]
    logged = [r["valid_loss"] for r in read_jsonl(trained_run / "metrics.jsonl") if r["event"] == "valid"]
    assert [e.value for e in acc.Scalars("valid/loss")] == pytest.approx(logged, rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["commands.test", "commands.inference"])
def test_testing_and_translating_start_without_the_training_engine_or_plots(command: str) -> None:
    """test.py logs its scores through this module: importing ignite and matplotlib there (for the
    training handlers and images) cost every test.py and inference.py start 1.6 of its 3.3 s."""
    heavy = "{'ignite', 'matplotlib'}"
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {command}; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout
