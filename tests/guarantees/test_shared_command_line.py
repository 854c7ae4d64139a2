"""The command layer every entry script shares (commands/cli.py): an old and a new
spelling of one flag that disagree are refused, and main_guard's statuses for a Ctrl-C, a closed
pipe and an exhausted memory are one line (or silence), never a traceback."""

from __future__ import annotations

import pytest
from helpers import one_error_line
from in_process import run_in_process as run

from commands.cli import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, main_guard


@pytest.mark.parametrize(
    "args, flags",
    [
        (["inference.py", "--src_text", "Bonjour", "--output", "a.txt", "--out", "b.txt"], "--output and --out"),
        (["inference.py", "--src_text", "Bonjour", "--out", "b.txt", "--output", "a.txt"], "--output and --out"),
        (["inference.py", "--input", "a.txt", "--src", "b.txt"], "--src and --input"),
        (["visualize.py", "attention", "--src", "Bonjour", "--src_text", "Salut"], "--src_text and --src"),
    ],
    ids=["new-then-old", "old-then-new", "inference-input", "visualize-src"],
)
def test_two_spellings_of_one_flag_that_disagree_are_refused(args: list[str], flags: str, tmp_path) -> None:
    message = one_error_line(run([*args, "--model_path", str(tmp_path / "none")]))
    assert flags in message and "give it once" in message


def test_two_spellings_with_one_value_are_one_flag(tmp_path) -> None:
    proc = run(
        [
            "inference.py",
            "--model_path",
            str(tmp_path / "none"),
            "--src_text",
            "Bonjour",
            "--out",
            "a.txt",
            "--output",
            "a.txt",
        ]
    )
    assert "no such checkpoint" in one_error_line(proc)  # got past the flags to the model


def _raises(error: BaseException):
    def main(argv):
        raise error

    return main


def test_main_guard_statuses(capsys) -> None:
    assert main_guard(_raises(KeyboardInterrupt())) == EXIT_INTERRUPTED
    assert "interrupted: stopped before finishing" in capsys.readouterr().err
    assert main_guard(_raises(MemoryError())) == EXIT_ERROR
    assert capsys.readouterr().err.startswith("error: out of memory")


def test_device_out_of_memory_without_a_message_is_one_line(capsys) -> None:
    """torch's OutOfMemoryError may carry no text: still one line, not an IndexError's traceback."""
    import torch

    assert main_guard(_raises(torch.OutOfMemoryError())) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory on the device") and len(err.splitlines()) == 1, err


def test_a_closed_pipe_is_silent(capsys, monkeypatch) -> None:
    import os

    monkeypatch.setattr(os, "dup2", lambda *a: None)  # keep pytest's own stdout
    assert main_guard(_raises(BrokenPipeError())) == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_model_too_large_for_this_machine_is_one_line(tmp_path) -> None:
    """Under the schema's cap (10 billion parameters) but over the memory this process may use: torch's
    allocator fails with a RuntimeError, said as one line naming the sizes (models.build_model)."""
    import os
    import resource
    import subprocess
    import sys

    from helpers import ROOT, tiny_overrides, with_sets

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    # 9.4 billion parameters, most in the first feed-forward weight (8.6 GB in float32): the allocator
    # fails there at once, not after seconds of initialising smaller weights
    sizes = ["model.d_model=8192", "model.num_heads=8", "model.ffn_dim=262144"]
    args = with_sets(tiny_overrides(tmp_path / "run", tmp_path / "cache"), *sizes)
    proc = subprocess.run(
        [sys.executable, "train.py", "--config", "configs/demo/sinusoidal.yaml", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=limit_memory,
        timeout=300,
    )
    assert "does not fit in this machine's memory" in one_error_line(proc)
    assert "model.d_model=8192" in proc.stderr


def test_inference_streams_into_stdout_and_pipes_by_design(trained_run, tmp_path) -> None:
    """`--output -` is stdout (as `--src -` is stdin); a named pipe is written into, never replaced by a
    file (translations stream by design; every other command refuses a non-regular --output)."""
    import os
    import stat
    import threading

    model = ["inference.py", "--run", str(trained_run), "--src_text", "Bonjour .", "Merci ."]
    to_stdout = run([*model, "--output", "-"])
    assert to_stdout.returncode == 0 and len(to_stdout.stdout.splitlines()) == 2, to_stdout.stderr[-2000:]
    fifo = tmp_path / "translations"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    proc = run([*model, "--output", str(fifo)])
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert received and received[0].splitlines() == to_stdout.stdout.splitlines()
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_stream_that_fails_names_the_output(trained_run) -> None:
    """/dev/full: every write fails with 'No space left on device'; the line names the --output."""
    proc = run(["inference.py", "--run", str(trained_run), "--src_text", "Bonjour .", "--output", "/dev/full"])
    message = one_error_line(proc)
    assert "--output /dev/full" in message and "No space left" in message


def test_inference_with_stdin_closed_is_one_line() -> None:
    """`inference.py --src - <&-`: Python starts with sys.stdin None."""
    import os
    import subprocess
    import sys

    from helpers import ROOT

    proc = subprocess.run(
        [sys.executable, "inference.py", "--model_path", "no/such.pt", "--src", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.close(0),
        timeout=120,
    )
    assert "standard input is closed" in one_error_line(proc)
