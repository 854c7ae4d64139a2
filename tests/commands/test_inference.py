"""inference.py as fairseq/OpenNMT users drive it: decoding flags, --output, interactive stdin,
mixed precision, n-best format (through the real command, on a tiny trained run)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, one_error_line
from helpers import run as run_subprocess
from in_process import run_in_process as run  # a real process only where stdin is read

from commands import inference
from commands.cli import UsageError

SENTENCES = ["Bonjour !", "Je ne sais pas.", "Où est la gare ?"]


def test_help_lists_the_decoding_flags() -> None:
    help_text = run(["inference.py", "--help"]).stdout
    for flag in (
        "--lenpen",
        "--alpha",
        "--length_penalty",
        "--max_len_a",
        "--max_len_b",
        "--max_tokens",
        "--output",
        "--precision",
        "--interactive",
        "--nbest",
        "--beam_size",
        "--min_len",
    ):
        assert flag in help_text, flag


def test_decoding_flags_become_the_search_settings(trained_run: Path, monkeypatch, tmp_path: Path) -> None:
    seen = []
    real = inference.translate
    monkeypatch.setattr(inference, "translate", lambda *a, **k: seen.append(a[3]) or real(*a, **k))
    assert (
        inference.main(
            [
                "--run",
                str(trained_run),
                "--src_text",
                *SENTENCES,
                "--beam",
                "3",
                "--lenpen",
                "0.8",
                "--length_penalty",
                "avg",
                "--max_len_a",
                "0.5",
                "--max_len_b",
                "2",
                "--max_tokens",
                "77",
                "--min_len",
                "1",
                "--no_repeat_ngram",
                "2",
                "--precision",
                "bf16",
                "--output",
                str(tmp_path / "out.txt"),
            ]
        )
        == 0
    )
    (settings,) = seen
    assert (settings.strategy, settings.beam_size, settings.alpha, settings.length_penalty) == ("beam", 3, 0.8, "avg")
    assert (settings.max_len_a, settings.max_len_b, settings.max_tokens) == (0.5, 2, 77)
    assert (settings.min_len, settings.no_repeat_ngram, settings.precision) == (1, 2, "bf16")
    # --alpha is --lenpen's other name; a flag and --set on other keys combine, on one key are refused
    seen.clear()
    args = ["--run", str(trained_run), "--src_text", "Merci.", "--alpha", "0.3", "--set", "decoding.max_tokens=55"]
    assert inference.main(args) == 0
    assert (seen[0].alpha, seen[0].max_tokens) == (0.3, 55)
    with pytest.raises(UsageError, match="--lenpen/--alpha and --set decoding.alpha"):
        inference.main([*args, "--set", "decoding.alpha=0.9"])


def test_the_length_limit_flags_bound_the_output(trained_run: Path, capsys) -> None:
    from tokenizer import BPETokenizer

    tokenizer = BPETokenizer.load(trained_run)
    assert (
        inference.main(
            [
                "--run",
                str(trained_run),
                "--src_text",
                *SENTENCES,
                "--max_len_a",
                "0",
                "--max_len_b",
                "2",
                "--strategy",
                "greedy",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(len(tokenizer.encode_tgt(line)) <= 2 for line in lines)


@pytest.mark.slow
def test_piped_input_lenpen_and_output_file(trained_run: Path, tmp_path: Path) -> None:
    """The README's piped use: inference.py --run R --lenpen 0.6 --output out.txt < in.txt."""
    proc = run_subprocess(
        ["inference.py", "--run", str(trained_run), "--lenpen", "0.6", "--output", str(tmp_path / "out.txt")],
        stdin="".join(s + "\n" for s in SENTENCES),
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr[-2000:]
    written = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    direct = run(["inference.py", "--run", str(trained_run), "--lenpen", "0.6", "--src_text", *SENTENCES])
    assert written == direct.stdout.splitlines() and len(written) == 3
    # an existing file is never replaced unless asked
    message = one_error_line(
        run(["inference.py", "--run", str(trained_run), "--src_text", "Merci.", "--output", str(tmp_path / "out.txt")])
    )
    assert "--output" in message and "--overwrite" in message
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == written
    again = run(
        [
            "inference.py",
            "--run",
            str(trained_run),
            "--src_text",
            "Merci.",
            "--output",
            str(tmp_path / "out.txt"),
            "--overwrite",
        ]
    )
    assert again.returncode == 0 and len((tmp_path / "out.txt").read_text().splitlines()) == 1


def read_line(stream, timeout: float = 120.0) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, "no translation came back while the input stayed open"
    return stream.readline()


@pytest.mark.slow
@pytest.mark.parametrize("stdin_flag", [[], ["--src", "-"]], ids=["stdin", "input-dash"])
def test_interactive_translates_each_line_as_it_arrives(trained_run: Path, stdin_flag: list[str]) -> None:
    """With --interactive (the default at a terminal) a line is translated before the next one is
    typed: the answer comes back while stdin is still open."""
    expected = run(["inference.py", "--run", str(trained_run), "--src_text", *SENTENCES[:2], ""]).stdout.splitlines()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "inference.py", "--run", str(trained_run), "--interactive", *stdin_flag],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        answers = []
        for sentence in (*SENTENCES[:2], ""):
            proc.stdin.write(sentence + "\n")
            proc.stdin.flush()
            answers.append(read_line(proc.stdout).rstrip("\n"))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()[-2000:]
    finally:
        proc.kill()
    assert answers == expected  # the same translations as a batch, one at a time


def test_interactive_with_other_input_is_refused(trained_run: Path, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("Bonjour.\n")
    for other in (["--src_text", "Bonjour."], ["--src", str(tmp_path / "in.txt")]):
        message = one_error_line(run(["inference.py", "--run", str(trained_run), "--interactive", *other]))
        assert "--interactive" in message and "standard input" in message


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_decoding_runs_on_cpu(trained_run: Path, precision: str) -> None:
    fp32 = run(["inference.py", "--run", str(trained_run), "--src_text", *SENTENCES]).stdout.splitlines()
    proc = run(["inference.py", "--run", str(trained_run), "--src_text", *SENTENCES, "--precision", precision])
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(fp32) == 3 and all(lines)


@pytest.mark.slow
def test_interactive_input_that_is_not_utf8_names_its_line(trained_run: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "inference.py", "--run", str(trained_run), "--interactive"],
        cwd=ROOT,
        input="Bonjour.\n".encode() + b"caf\xe9\n",
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2 and len(proc.stdout.decode().splitlines()) == 1  # the first line was translated
    errors = [line for line in proc.stderr.decode().splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: stdin:2: not valid UTF-8"), proc.stderr.decode()[-2000:]


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


def test_a_call_validates_its_config_once(trained_run: Path, monkeypatch, capsys) -> None:
    """Issue 68: `--beam_size 3` was turned back into text and the config validated five times (the
    checkpoint's, the run's config.yaml, three times at test time); a flag's value now stays typed and
    the config the model is tested under is validated once."""
    import settings.config as config

    validated = []
    real = config.from_raw
    monkeypatch.setattr(config, "from_raw", lambda raw: validated.append(raw) or real(raw))
    argv = ["--run", str(trained_run), "--src_text", "Bonjour !", "--beam_size", "3", "--set", "decoding.alpha=0.8"]
    assert inference.main(argv) == 0
    assert len(validated) == 1
    assert validated[0]["decoding"]["beam_size"] == 3 and validated[0]["decoding"]["alpha"] == 0.8
    assert capsys.readouterr().out.count("\n") == 1
