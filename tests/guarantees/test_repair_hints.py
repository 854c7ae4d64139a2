"""Hints that repair: a damaged test output is named with a
test.py command that repairs it as it stands (study/read/run_stats.py: retest_hint); an empty
held-out split names where its pairs come from, not the Tatoeba path; tokenizer.name: ~/tok is
read from the home folder, as data paths are."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from helpers import copy_of, one_error_line, scored_and_sinusoidal, tiny_overrides
from in_process import run_in_process as run

from data import prepare_splits
from data.parallel_text import CorpusError
from settings.config import DataConfig
from tokenizer import BPETokenizer


@pytest.fixture(scope="module")
def compared_pair(trained_run: Path, tmp_path_factory) -> tuple[Path, Path]:
    return scored_and_sinusoidal(trained_run, tmp_path_factory.mktemp("r3-review"))


# ---- 9. the retest hint is a command that runs as it stands


@pytest.mark.slow
def test_a_cut_test_output_is_named_with_a_command_that_repairs_it(compared_pair, tmp_path: Path) -> None:
    rope, sinusoidal = (copy_of(r, tmp_path / r.name) for r in compared_pair)
    hyps = rope / "test" / "hypotheses.txt"
    hyps.write_text("".join(hyps.read_text().splitlines(keepends=True)[:3]))
    compare = ["compare.py", str(rope), str(sinusoidal), "--output", str(tmp_path / "sum")]
    line = one_error_line(run(compare))
    assert str(hyps) in line, line
    command = shlex.split(re.search(r"\((python test\.py .*?)\)", line).group(1))
    assert command[:4] == ["python", "test.py", "--run", str(rope)] and "--overwrite" in command, command
    proc = run(command[1:])  # the hint, run as written
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run(compare)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_variants_hint_names_its_folder_and_settings(compared_pair, tmp_path: Path) -> None:
    rope, sinusoidal = (copy_of(r, tmp_path / r.name) for r in compared_pair)
    variant = rope / "test_beam3"  # what sweep.py --variant beam3 decoding.beam_size=3 writes
    shutil.copytree(rope / "test", variant)
    scores = json.loads((variant / "scores.json").read_text())
    scores["test_time_overrides"] = {"decoding.beam_size": 3}
    scores["sacrebleu"] = "n/a"  # a hand edit: not a number
    (variant / "scores.json").write_text(json.dumps(scores))
    line = one_error_line(run(["compare.py", str(rope), str(sinusoidal), "--output", str(tmp_path / "sum")]))
    command = shlex.split(re.search(r"\((python test\.py .*?)\)", line).group(1))
    assert command[1:] == [
        "test.py",
        "--run",
        str(rope),
        "--output",
        str(variant),
        "--set",
        "decoding.beam_size=3",
        "--overwrite",
    ], line


# ---- 11. an empty held-out split names its own origin


def test_an_empty_valid_split_names_its_parallel_text_files(tmp_path: Path) -> None:
    files = {}
    for name in ("train.fr", "train.en", "valid.fr", "valid.en"):
        files[name] = tmp_path / name
        files[name].write_text("" if name.startswith("valid") else "bonjour\n")
    cfg = DataConfig(
        source="parallel_text",
        train={"src": str(files["train.fr"]), "tgt": str(files["train.en"])},
        valid={"src": str(files["valid.fr"]), "tgt": str(files["valid.en"])},
        test={"src": str(files["train.fr"]), "tgt": str(files["train.en"])},
        cache_dir="",
    )
    tokenizer = BPETokenizer.train(["bonjour", "hello"], vocab_size=40, min_frequency=1)
    corpus = {"train": [("bonjour", "hello")], "valid": [], "test": [("bonjour", "hello")]}
    with pytest.raises(CorpusError) as caught:  # the backstop, behind the readers' own check
        prepare_splits(cfg, tokenizer, splits=("valid",), corpus=lambda: corpus, log=lambda _: None)
    assert str(files["valid.fr"]) in str(caught.value) and cfg.path not in str(caught.value), caught.value


# ---- 16. tokenizer.name: ~/tok is under the home folder


def test_a_tokenizer_name_under_home_is_looked_up_there(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    flags = [*tiny_overrides(tmp_path / "run", tmp_path / "cache"), "--set", "tokenizer.type=pretrained"]
    line = one_error_line(
        run(["train.py", "--config", "configs/demo/rope.yaml", *flags, "--set", "tokenizer.name=~/tok"])
    )
    assert f"{home / 'tok'} is missing" in line, line
