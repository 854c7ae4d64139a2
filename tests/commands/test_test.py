"""test.py (commands/test.py) through its entry point: scores and hypotheses written, a config that does
not match the checkpoint refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

from in_process import run_in_process as run


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
