"""A tiny run through the real command-line entry points: train -> checkpoint -> resume -> test -> translate.

Uses a sample of the shipped corpus capped to a few hundred pairs and a very small model; the
commands run in this process (tests/in_process.py), except where a real interpreter is the point:
piped stdin, and every script's `--help` as `python SCRIPT` runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_jsonl, tiny_overrides
from helpers import run as run_subprocess
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


def test_tensorboard_events_hold_training_and_validation_scalars(trained_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(trained_run / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/lr", "valid/loss", "valid/accuracy", "valid/ppl", "valid/bleu"} <= tags
    assert [e.step for e in acc.Scalars("valid/loss")] == [3, 6]
    logged = [r["valid_loss"] for r in read_jsonl(trained_run / "metrics.jsonl") if r["event"] == "valid"]
    assert [e.value for e in acc.Scalars("valid/loss")] == pytest.approx(logged, rel=1e-5)


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


def test_test_py_writes_scores_and_hypotheses(trained_run: Path) -> None:
    proc = run(["test.py", "--run", str(trained_run)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = trained_run / "test"
    scores = json.loads((out / "scores.json").read_text())
    for key in ("sacrebleu", "sacrebleu_signature", "chrf", "nltk_bleu4", "num_sentences"):
        assert key in scores
    assert scores["num_sentences"] == 10
    assert 0.0 <= scores["nltk_bleu4"] <= 1.0 and "nrefs:1" in scores["sacrebleu_signature"]
    hyps = (out / "hypotheses.txt").read_text().splitlines()
    refs = (out / "references.txt").read_text().splitlines()
    assert len(hyps) == len(refs) == 10
    # the same command again finds the test done; another test refuses to replace the scores unless asked
    again = run(["test.py", "--run", str(trained_run)])
    assert again.returncode == 0 and "already holds this test" in again.stdout, again.stdout
    again = run(["test.py", "--run", str(trained_run), "--set", "decoding.beam_size=3"])
    assert again.returncode == 2 and "--overwrite" in again.stderr
    # beam 1 through the command line equals greedy through the command line
    greedy = run(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--set",
            "decoding.strategy=greedy",
            "--output",
            str(trained_run / "test_greedy"),
        ]
    )
    beam1 = run(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--set",
            "decoding.beam_size=1",
            "--output",
            str(trained_run / "test_beam1"),
        ]
    )
    assert greedy.returncode == 0 and beam1.returncode == 0, greedy.stderr[-2000:] + beam1.stderr[-2000:]
    assert (trained_run / "test_greedy" / "hypotheses.txt").read_text() == (
        trained_run / "test_beam1" / "hypotheses.txt"
    ).read_text()


@pytest.mark.slow
def test_inference_needs_only_the_checkpoint(trained_run: Path, tmp_path: Path) -> None:
    ckpt = next((trained_run / "checkpoints").glob("best_*.pt"))
    # run from an empty folder: no config, no corpus, no tokenizer file around
    proc = run(
        [str(ROOT / "inference.py"), "--model_path", str(ckpt), "--src_text", "Bonjour !", "Merci.", ""], cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.split("\n")
    assert len(lines) == 4 and lines[2] == "" and lines[3] == ""  # 3 translations; the empty input stays empty
    nbest = run_subprocess(
        [str(ROOT / "inference.py"), "--model_path", str(ckpt), "--nbest", "2"], cwd=tmp_path, stdin="Je t'aime.\n"
    )
    assert nbest.returncode == 0, nbest.stderr[-3000:]
    rows = [line.split("\t") for line in nbest.stdout.splitlines()]
    assert len(rows) == 2 and all(r[0] == "0" for r in rows)
    assert float(rows[0][1]) >= float(rows[1][1])


def test_config_and_checkpoint_mismatch_is_a_clear_error(trained_run: Path) -> None:
    ckpt = next((trained_run / "checkpoints").glob("best_*.pt"))
    proc = run(
        [
            "inference.py",
            "--config",
            "configs/demo/sinusoidal.yaml",
            "--model_path",
            str(ckpt),
            "--src_text",
            "Bonjour !",
        ]
    )
    assert proc.returncode == 2
    assert "model.positional.name" in proc.stderr and "model.d_model" in proc.stderr


@pytest.mark.slow
def test_every_command_has_help() -> None:
    """Each script run as `python SCRIPT --help` runs it (as __main__, its folder first on sys.path),
    the eight one after another in one fresh interpreter (one torch import, not eight)."""
    scripts = (
        "train.py",
        "test.py",
        "inference.py",
        "compare.py",
        "sweep.py",
        "export.py",
        "average.py",
        "visualize.py",
    )
    code = (
        "import runpy, sys\n"
        "for script in sys.argv[1:]:\n"
        "    print(f'==== {script}', flush=True)\n"
        "    sys.argv = [script, '--help']\n"
        "    try:\n"
        "        runpy.run_path(script, run_name='__main__')\n"
        "    except SystemExit as e:\n"
        "        print(f'==== exit {e.code!r}', flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *scripts],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = proc.stdout.split("==== ")[1:]
    assert len(outputs) == 2 * len(scripts), proc.stdout[-3000:]
    for script, (start, end) in zip(scripts, zip(outputs[::2], outputs[1::2])):
        assert start.startswith(script) and "usage:" in start, (script, start[:500])
        assert end.strip() in ("exit 0", "exit None"), (script, end)
