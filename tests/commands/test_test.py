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


def test_a_section_override_merges_into_the_runs_section(trained_run: Path, tmp_path: Path) -> None:
    """Issue 67: on a run trained with decoding.max_len_a=1.0 and max_len_b=5, `--set 'decoding={beam_size:
    3}'` reset them to the schema's defaults (1.5, 10); it merges now, and the run's own values are used
    and recorded. The same key given two values in two forms is refused in one line naming both."""
    from helpers import one_error_line

    out = tmp_path / "beam3"
    proc = run(["test.py", "--run", str(trained_run), "--set", "decoding={beam_size: 3}", "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    decoding = json.loads((out / "scores.json").read_text())["decoding"]
    assert (decoding["beam_size"], decoding["max_len_a"], decoding["max_len_b"]) == (3, 1.0, 5)
    both = ["--set", "decoding.beam_size=1", "--set", "decoding={beam_size: 3}"]
    line = one_error_line(run(["test.py", "--run", str(trained_run), *both, "--output", str(tmp_path / "x")]))
    assert "--set decoding.beam_size=1 and --set decoding={beam_size: 3} give decoding.beam_size two values" in line
    assert not (tmp_path / "x").exists()


def test_a_run_that_cannot_be_written_is_tested_into_another_folder(
    trained_run: Path, tmp_path: Path, monkeypatch
) -> None:
    """Issue 67: a run on a read-only mount (or another user's) could not be tested even with --output
    elsewhere, because its lock needs write access. It is read without its lock then (said once); with
    the output inside it, the error names the run folder test.py would write into. (Root may write any
    folder, so the read-only mount is the lock's own refusal: EROFS, as the kernel gives it.)"""
    import errno

    import filelock
    from helpers import copy_of, one_error_line

    run_dir = copy_of(trained_run, tmp_path / "theirs")
    acquire = filelock.FileLock.acquire

    def read_only(self, *a, **k):
        if Path(self.lock_file).parent == run_dir:
            raise OSError(errno.EROFS, "Read-only file system")
        return acquire(self, *a, **k)

    monkeypatch.setattr(filelock.FileLock, "acquire", read_only)
    before = sorted(p.name for p in run_dir.iterdir())
    out = tmp_path / "mine"
    proc = run(["test.py", "--run", str(run_dir), "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"note: {run_dir} cannot be written here, so test.py reads it without its lock" in proc.stdout
    assert (out / "scores.json").is_file() and sorted(p.name for p in run_dir.iterdir()) == before
    line = one_error_line(run(["test.py", "--run", str(run_dir), "--overwrite"]))
    assert "Read-only file system" in line and f"test.py writes its scores into {run_dir}/test unless --output" in line


def test_numbers_in_set_read_as_yaml_1_2_reads_them(trained_run: Path, tmp_path: Path) -> None:
    """Issue 75: `--set model.dropout=1e-1` on a run trained with 0.1 was refused as a change (YAML 1.1
    reads `1e-1` as the text '1e-1'); numbers in --set read as YAML 1.2 reads them, so the trained value
    again is fine, while another value (2e-1) is still refused in one line."""
    from helpers import one_error_line
    from in_process import run_in_process

    out = tmp_path / "same"
    same = ["--set", "model.dropout=1e-1", "--set", "decoding.max_len_a=1E0", "--set", "decoding.beam_size=1"]
    proc = run_in_process(["test.py", "--run", str(trained_run), *same, "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "scores.json").read_text())["decoding"]["beam_size"] == 1
    other = run_in_process(["test.py", "--run", str(trained_run), "--set", "model.dropout=2e-1", "--output", str(out)])
    assert "model.dropout=0.2 (" in one_error_line(other) and "has model.dropout=0.1" in one_error_line(other)
