"""train.py (commands/train.py) through its entry point: a complete run folder, an existing one never
overwritten, a resume that continues from the last checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import read_jsonl, tiny_overrides
from in_process import run_in_process as run


def test_train_writes_a_complete_run_folder(trained_run: Path) -> None:
    assert (trained_run / "config.yaml").is_file()
    assert (trained_run / "tokenizer.json").is_file()
    ckpts = sorted(p.name for p in (trained_run / "checkpoints").glob("*.pt"))
    assert any(n.startswith("best_") and "valid_loss=" in n for n in ckpts), ckpts
    assert any(n.startswith("last_") for n in ckpts), ckpts
    records = read_jsonl(trained_run / "metrics.jsonl")
    valid = [r for r in records if r["event"] == "valid"]
    assert [r["step"] for r in valid] == [3, 6]
    assert all(0.0 <= r["valid_accuracy"] <= 1.0 and r["valid_loss"] > 0 for r in valid)
    assert "valid_bleu" in valid[-1]
    assert [r["step"] for r in records if r["event"] == "train"] == [2, 4, 6]
    end = [r for r in records if r["event"] == "end"][-1]
    assert end["step"] == 6 and end["params"] > 0
    # the split's overlap, measured for this run: the grouped Tatoeba split shares no source
    report = json.loads((trained_run / "data_report.json").read_text())
    for split, size in (("valid", 12), ("test", 10)):
        assert report[split]["pairs"] == size and report[split]["source"]["count"] == 0, report[split]


def test_existing_run_folder_is_not_overwritten(trained_run: Path) -> None:
    proc = run(
        ["train.py", "--config", "configs/demo/rope.yaml", *tiny_overrides(trained_run, trained_run.parent / "cache")]
    )
    assert proc.returncode == 2
    assert "already exists" in proc.stderr and "--resume" in proc.stderr


def test_resume_continues_from_the_last_checkpoint(trained_run: Path, tmp_path: Path) -> None:
    import shutil

    run_dir = tmp_path / "resumed"
    shutil.copytree(trained_run, run_dir)
    proc = run(["train.py", "--run", str(run_dir), "--set", "training.max_steps=9"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resumed from" in proc.stderr + proc.stdout
    records = read_jsonl(run_dir / "metrics.jsonl")
    starts = [r for r in records if r["event"] == "start"]
    assert [s["step"] for s in starts] == [0, 6]
    assert [r["step"] for r in records if r["event"] == "valid"] == [3, 6, 9]
    assert [r["step"] for r in records if r["event"] == "end"] == [6, 9]
