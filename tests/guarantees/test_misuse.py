"""Misuse and faults, each case through the real entry point. Nothing a user
made is lost, no wrong result is given without a word, and every failure is one line (exit 2).
The mechanisms: one write guard and atomic writes (utils/files.py), one lock per run folder
(utils/run_folder.py: RunLock), a resume that trusts the checkpoint, strict config reading."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from unittest import mock

import helpers
import pytest
from helpers import CONFIG, ROOT, one_error_line, read_jsonl, run, snapshot, tiny_overrides, train, with_sets
from in_process import run_in_process

from utils.run_folder import RunLock

ROPE = "configs/demo/rope.yaml"  # the trained_run fixture's config


def copy_run(trained_run: Path, tmp_path: Path, name: str = "run") -> Path:
    target = tmp_path / name
    shutil.copytree(trained_run, target)
    return target


def tiny_sets(run_dir, cache: Path, **kw) -> list[str]:
    return tiny_overrides(Path(run_dir), cache, **kw)


# Every entry point runs in this process (tests/in_process.py: the same exit code, stdout and
# stderr as `helpers.run`'s subprocess, without a new interpreter's torch import), except where a
# test needs another process: one that is refused a lock this test process holds.


def train_here(*args, **kwargs):
    """`helpers.train` (the same command line), run in this process."""
    with mock.patch.object(helpers, "run", run_in_process):
        return train(*args, **kwargs)


# ---- a user's file lost (1-4)


def test_01_a_users_own_config_in_a_fresh_run_dir_is_never_replaced(tmp_path: Path) -> None:
    from settings.config import dump_text, load_config

    folder = tmp_path / "e"
    folder.mkdir()
    mine = folder / "config.yaml"
    # a complete config, commented by its author: not the file train.py writes
    mine.write_text("# my experiment: the demo, smaller\n" + dump_text(load_config(ROOT / CONFIG)))
    for config in (mine, ROOT / CONFIG):  # trained from itself, or from another config into its folder
        before = mine.read_text()
        message = one_error_line(
            run_in_process(["train.py", "--config", str(config), *tiny_sets(folder, tmp_path / "cache")])
        )
        assert "written by hand" in message and str(folder) in message, message
        assert mine.read_text() == before and sorted(p.name for p in folder.iterdir()) == ["config.yaml"]
    # a config that is not even an experiment config is refused as well
    mine.write_text(f"# mine\nbase: {ROOT / CONFIG}\nname: mine\n")
    message = one_error_line(
        run_in_process(["train.py", "--config", str(mine), *tiny_sets(folder, tmp_path / "cache")])
    )
    assert "not a run folder" in message and mine.read_text().startswith("# mine"), message


def test_02_inference_never_writes_over_its_input(trained_run: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.fr"
    source.write_text("Bonjour !\nMerci.\n")
    link = tmp_path / "link.fr"
    link.symlink_to(source)
    for target in (source, link):
        message = one_error_line(
            run_in_process(
                [
                    "inference.py",
                    "--run",
                    str(trained_run),
                    "--src",
                    str(source),
                    "--output",
                    str(target),
                    "--overwrite",
                ]
            )
        )
        assert "is also this command's input" in message, message
        assert source.read_text() == "Bonjour !\nMerci.\n"


def test_03_average_never_replaces_a_training_checkpoint_or_a_users_file(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    last = max((run_dir / "checkpoints").glob("last_*.pt"))
    before = last.read_bytes()
    message = one_error_line(
        run_in_process(["average.py", "--run", str(run_dir), "--average_last", "2", "--output", str(last)])
    )
    assert "input" in message or "run folder" in message, message
    assert last.read_bytes() == before
    user = tmp_path / "notes.txt"
    user.write_text("mine")
    message = one_error_line(
        run_in_process(["average.py", "--run", str(run_dir), "--average_last", "2", "--output", str(user)])
    )
    assert "exists; pass --overwrite" in message and user.read_text() == "mine"
    # its own default output, in checkpoints/, is allowed; rewritten, as any output, with --overwrite
    assert run_in_process(["average.py", "--run", str(run_dir), "--average_last", "2"]).returncode == 0
    again = one_error_line(run_in_process(["average.py", "--run", str(run_dir), "--average_last", "2"]))
    assert "exists; pass --overwrite" in again
    assert run_in_process(["average.py", "--run", str(run_dir), "--average_last", "2", "--overwrite"]).returncode == 0
    assert (run_dir / "checkpoints" / "averaged_last2.pt").is_file()
    assert run_in_process(["train.py", "--run", str(run_dir), "--set", "training.max_steps=7"]).returncode == 0


@pytest.mark.slow
def test_04_overwrite_of_the_working_directory_starts_a_new_run_in_it(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    corpus = ROOT / "data" / "corpora" / "tatoeba-fr-en" / "fra-eng.tsv.gz"
    proc = run_in_process(
        [
            str(ROOT / "train.py"),
            "--config",
            str(ROOT / ROPE),
            *with_sets(tiny_sets(".", tmp_path / "cache"), f"data.path={corpus}"),
            "--overwrite",
        ],
        cwd=run_dir,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert run_dir.is_dir() and list((run_dir / "checkpoints").glob("last_*.pt"))
    assert [r["resume"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "start"] == [False]


# ---- a wrong result without a word (5-12)


def test_05_a_resume_trusts_the_checkpoint_not_a_hand_edited_config(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    config = run_dir / "config.yaml"
    text = re.sub(r"(  positional:\n)(    .*\n)+", r"\1    name: sinusoidal\n", config.read_text())
    assert "name: sinusoidal" in text and "theta" not in text
    config.write_text(text)
    before = snapshot(run_dir / "checkpoints")
    message = one_error_line(run_in_process(["train.py", "--run", str(run_dir), "--set", "training.max_steps=9"]))
    assert "model.positional.name: 'rope' -> 'sinusoidal'" in message, message
    assert snapshot(run_dir / "checkpoints") == before


def test_07_a_key_given_twice_in_a_config_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "dup.yaml"
    config.write_text(f"base: {ROOT / CONFIG}\nmodel:\n  d_model: 64\nmodel:\n  d_model: 32\n")
    message = one_error_line(
        run_in_process(["train.py", "--config", str(config), "--set", f"run_dir={tmp_path / 'r'}"])
    )
    assert "duplicate key 'model'" in message and "line 2" in message and "line 4" in message, message
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("count", ["0", "-1"])
def test_08_average_counts_must_be_positive(trained_run: Path, count: str) -> None:
    assert "--average_last must be at least 1" in one_error_line(
        run_in_process(["average.py", "--run", str(trained_run), "--average_last", count])
    )


def test_09_a_sweep_compares_before_it_skips(trained_run: Path, tmp_path: Path) -> None:
    base = copy_run(trained_run, tmp_path, "base")  # a RoPE run
    assert run_in_process(["test.py", "--run", str(base)]).returncode == 0
    before = snapshot(base)
    proc = run_in_process(["sweep.py", CONFIG, "--set", f"run_dir={base}"])  # a sinusoidal config into it
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "another configuration" in proc.stdout and "model.positional.name: 'rope' -> 'sinusoidal'" in proc.stdout
    assert snapshot(base) == before
    # a folder holding a user's file beside test/scores.json is not "finished": it is left alone
    (base / "notes.txt").write_text("mine")
    proc = run_in_process(["sweep.py", ROPE, "--set", f"run_dir={base}"])
    assert proc.returncode == 2 and "left alone" in proc.stdout and "notes.txt" in proc.stdout
    assert (base / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_10_one_writer_per_run_folder(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    fresh = tmp_path / "fresh"
    before = snapshot(run_dir)
    with RunLock(run_dir, "another test.py"), RunLock(fresh, "another train.py"):  # held by this process:
        message = one_error_line(run(["test.py", "--run", str(run_dir), "--overwrite"]))  # others: subprocesses
        assert f"in use by another process (PID {os.getpid()}: another test.py)" in message, message
        message = one_error_line(
            run(
                [
                    "train.py",
                    "--config",
                    CONFIG,
                    *with_sets(tiny_sets(fresh, tmp_path / "cache", steps=4), "training.bleu_sentences=0"),
                ]
            )
        )
        assert "in use by another process" in message and "another train.py" in message, message
    assert snapshot(run_dir) == before
    assert [p.name for p in fresh.iterdir() if p.name != ".lock"] == []  # the OS lock's file stays, unlocked
    # released: both work now, and leave no lock behind that makes the folder foreign
    assert run_in_process(["test.py", "--run", str(run_dir)]).returncode == 0
    assert train_here(fresh, tmp_path / "cache").returncode == 0
    assert run_in_process(["train.py", "--run", str(fresh), "--set", "training.max_steps=5"]).returncode == 0


@pytest.mark.parametrize("inside", ["", "checkpoints", "mine"])
def test_11_test_outputs_never_go_into_the_run_folders_own_places(
    trained_run: Path, tmp_path: Path, inside: str
) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    before = snapshot(run_dir)
    message = one_error_line(run_in_process(["test.py", "--run", str(run_dir), "--output", str(run_dir / inside)]))
    assert "run folder" in message, message
    assert snapshot(run_dir) == before


def test_12_nbest_with_greedy_search_is_an_error(trained_run: Path) -> None:
    message = one_error_line(
        run_in_process(
            [
                "inference.py",
                "--run",
                str(trained_run),
                "--src_text",
                "Bonjour !",
                "--strategy",
                "greedy",
                "--nbest",
                "3",
            ]
        )
    )
    assert "decoding.nbest=3 needs beam search" in message


# ---- tracebacks instead of one line (13-16)


@pytest.mark.parametrize("value", ["nan", "inf", "-.inf"])
def test_13_non_finite_numbers_are_refused_by_name(tmp_path: Path, value: str) -> None:
    message = one_error_line(train_here(tmp_path / "r", tmp_path / "cache", f"training.lr={value}"))
    assert "'training.lr' must be a finite number" in message, message


def test_14_overwrite_never_follows_a_symlink(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    link = tmp_path / "link"
    link.symlink_to(run_dir)
    before = snapshot(run_dir)
    message = one_error_line(train_here(link, tmp_path / "cache", flags=("--overwrite",)))
    assert "symbolic link" in message and "deleting" not in message, message
    assert snapshot(run_dir) == before and link.is_symlink()


def test_15_a_damaged_or_foreign_tokenizer_is_named(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    tokenizer = run_dir / "tokenizer.json"
    good = tokenizer.read_text()
    tokenizer.write_text(good[: len(good) // 2])
    message = one_error_line(run_in_process(["train.py", "--run", str(run_dir), "--set", "training.max_steps=8"]))
    assert "tokenizer.json is not a readable tokenizer" in message, message
    other = tmp_path / "other"  # a run with another vocabulary size
    assert train_here(other, tmp_path / "cache2", "tokenizer.vocab_size=300").returncode == 0
    shutil.copy(other / "tokenizer.json", tokenizer)
    message = one_error_line(run_in_process(["train.py", "--run", str(run_dir), "--set", "training.max_steps=8"]))
    assert "does not fit" in message and "tokenizer.json" in message, message


def test_16_an_empty_split_is_named(trained_run: Path, tmp_path: Path) -> None:
    message = one_error_line(train_here(tmp_path / "r", tmp_path / "cache", "data.valid_size=0"))
    assert "data.valid_size must be at least 1" in message, message
    message = one_error_line(
        run_in_process(
            [
                "test.py",
                "--run",
                str(trained_run),
                "--split",
                "valid",
                "--set",
                "data.valid_size=0",
                "--output",
                str(tmp_path / "out"),
            ]
        )
    )
    assert "data.valid_size" in message and not (tmp_path / "out").exists()
    empty = tmp_path / "empty.fr"  # a file pair given by flag: the line says where to name another
    empty.write_text("\n")
    (tmp_path / "empty.en").write_text("\n")
    args = [
        "test.py",
        "--run",
        str(trained_run),
        "--src",
        str(empty),
        "--ref",
        str(tmp_path / "empty.en"),
        "--output",
        str(tmp_path / "e"),
    ]
    message = one_error_line(run_in_process(args))
    assert f"{empty}: file is empty (no text): name the right file (in the config or the flag" in message, message


# ---- disk full (17): every write whole or not at all


def no_partial_files(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith("tmp")]


def fail_writes(monkeypatch) -> None:
    """Every atomic write fails as on a full disk, and so does torch.save of a checkpoint (torch
    reports it as a RuntimeError)."""
    import torch

    real_save = torch.save

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    def save(obj, f, *args, **kwargs):
        if "checkpoints" in str(getattr(f, "name", "")):
            raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr("utils.files.os.fsync", full)
    monkeypatch.setattr(torch, "save", save)


def test_17_disk_full_leaves_nothing_partial(trained_run: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    from commands import inference
    from commands import train as train_cmd
    from commands.cli import main_guard
    from commands.test import run_test
    from commands.test_request import TestRequest

    fail_writes(monkeypatch)
    out = tmp_path / "out.en"
    assert main_guard(inference.main, ["--run", str(trained_run), "--src_text", "Bonjour !", "--output", str(out)]) == 2
    assert not out.exists() and no_partial_files(tmp_path) == []
    scores = tmp_path / "scores"
    assert main_guard(lambda _: run_test(TestRequest(run=str(trained_run), output=str(scores)))) == 2
    assert not (scores / "references.txt").exists() and no_partial_files(scores) == []
    run_dir = tmp_path / "run"
    monkeypatch.setattr("utils.files.os.fsync", lambda fd: None)  # the start-up files may be written
    args = ["--config", CONFIG, *tiny_sets(run_dir, tmp_path / "cache", steps=3)]
    assert main_guard(train_cmd.main, args) == 2
    err = capsys.readouterr().err
    assert "cannot write the checkpoint" in err and "Traceback" not in err, err[-2000:]
    assert list((run_dir / "checkpoints").iterdir()) == []


def test_17_a_real_full_tmpfs(trained_run: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.decode().strip()}")
    try:
        (small / "filler").write_bytes(b"\0" * (2 * 1024 * 1024 - 4096))
        src = tmp_path / "in.fr"
        src.write_text("Bonjour !\n" * 2000)
        message = one_error_line(
            run_in_process(
                ["inference.py", "--run", str(trained_run), "--src", str(src), "--output", str(small / "out.en")]
            )
        )
        assert "out.en" in message and "No space left" in message, message
        assert sorted(p.name for p in small.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", str(small)], check=False)


# ---- corrupt run files (18-20)


def test_18_a_broken_metrics_line_is_named_before_training(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    metrics = run_dir / "metrics.jsonl"
    lines = len(metrics.read_text().splitlines())
    with open(metrics, "a") as f:
        f.write('{"event": "train", "step": 7, "loss":\n')
    before = snapshot(run_dir / "checkpoints")
    message = one_error_line(run_in_process(["train.py", "--run", str(run_dir), "--set", "training.max_steps=9"]))
    assert f"metrics.jsonl:{lines + 1}: not a JSON object" in message, message
    assert snapshot(run_dir / "checkpoints") == before
    message = one_error_line(run_in_process(["compare.py", str(run_dir)]))
    assert "metrics.jsonl" in message, message


def test_19_killed_writes_leave_no_temporaries_and_two_checkpoints_always_exist(
    trained_run: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    (run_dir / "checkpoints" / "tmpk3j2_x9a").write_bytes(b"half a checkpoint")  # Ignite's temporary
    (run_dir / ".config.yaml.abc.tmp").write_text("half a config")  # ours
    proc = run_in_process(["train.py", "--run", str(run_dir), "--set", "training.max_steps=9"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tmpk3j2_x9a" in proc.stdout and no_partial_files(run_dir) == []


def test_19_rotation_writes_the_new_checkpoint_before_deleting_the_oldest(tmp_path: Path, monkeypatch) -> None:
    import torch
    from ignite.engine import Engine
    from ignite.handlers import Checkpoint

    from training.handlers import RotatingDiskSaver

    folder = tmp_path / "checkpoints"
    seen = []
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        seen.append(sorted(p.name for p in folder.glob("last_*.pt")))  # what exists while one is written
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    engine = Engine(lambda e, b: None)
    model = torch.nn.Linear(2, 2)
    handler = Checkpoint(
        {"model": model},
        RotatingDiskSaver(folder, create_dir=True, atomic=True),
        filename_prefix="last",
        n_saved=2,
        global_step_transform=lambda e, _: e.state.iteration,
    )
    for step in (1, 2, 3, 4):
        engine.state.iteration = step
        handler(engine)
    assert seen[2:] == [["last_model_1.pt", "last_model_2.pt"], ["last_model_2.pt", "last_model_3.pt"]]
    assert sorted(p.name for p in folder.iterdir()) == ["last_model_3.pt", "last_model_4.pt"]


def test_20_a_file_that_is_not_a_checkpoint_is_called_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("just text\n")
    message = one_error_line(run_in_process(["test.py", "--model_path", str(plain), "--output", str(tmp_path / "o")]))
    assert "is not a checkpoint (not a PyTorch file)" in message and "could run code" not in message


# ---- not as documented (21-23)


def test_21_blank_input_lines_are_empty_translations(trained_run: Path, tmp_path: Path) -> None:
    blank = tmp_path / "blank.fr"
    blank.write_text("  \n\t\n \n")
    proc = run_in_process(["inference.py", "--run", str(trained_run), "--src", str(blank)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "\n\n\n"


def test_22_an_empty_config_file_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    message = one_error_line(run_in_process(["train.py", "--config", str(empty), "--set", f"run_dir={tmp_path / 'r'}"]))
    assert "is empty" in message and not (tmp_path / "r").exists()


def test_23_an_interrupted_run_is_resumed_by_a_sweep_not_skipped(trained_run: Path, tmp_path: Path) -> None:
    runs_root = tmp_path / "runs"
    run_dir = runs_root / "demo" / "rope"
    shutil.copytree(trained_run, run_dir)
    assert run_in_process(["test.py", "--run", str(run_dir)]).returncode == 0
    scored_at = (run_dir / "test" / "scores.json").stat().st_mtime_ns
    metrics = run_dir / "metrics.jsonl"
    records = read_jsonl(metrics)
    records[-1].update(finished=False, stopped_by_signal=15)  # as a Ctrl-C / SIGTERM leaves it
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    sets = [
        x
        for s in tiny_sets(run_dir, tmp_path / "cache", steps=8)[1::2]
        if not s.startswith("run_dir=")
        for x in ("--set", s)
    ]
    proc = run_in_process(["sweep.py", ROPE, "--runs_root", str(runs_root), *sets])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming" in proc.stdout and "skipped" not in proc.stdout
    ends = [r for r in read_jsonl(metrics) if r["event"] == "end"]
    assert ends[-1]["finished"] is True and ends[-1]["step"] == 8
    assert (run_dir / "test" / "scores.json").stat().st_mtime_ns > scored_at  # tested again after training on


# ---- further cases of the same kinds


def test_test_py_never_replaces_a_users_files_in_its_output_folder(trained_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "references.txt").write_text("my references\n")
    message = one_error_line(run_in_process(["test.py", "--run", str(trained_run), "--output", str(folder)]))
    assert "references.txt exists; pass --overwrite" in message, message
    assert sorted(p.name for p in folder.iterdir()) == ["references.txt"]
    # its own sources given as --src inside the output folder are never written over, even with --overwrite
    src, ref = folder / "sources.txt", tmp_path / "ref.en"
    src.write_text("Bonjour !\n")
    ref.write_text("Hello!\n")
    message = one_error_line(
        run_in_process(
            [
                "test.py",
                "--run",
                str(trained_run),
                "--src",
                str(src),
                "--ref",
                str(ref),
                "--output",
                str(folder),
                "--overwrite",
            ]
        )
    )
    assert "also this command's input" in message and src.read_text() == "Bonjour !\n", message


def test_outputs_of_compare_and_visualize_are_guarded(trained_run: Path, tmp_path: Path) -> None:
    notes = tmp_path / "summary.md"
    notes.write_text("my notes")
    message = one_error_line(
        run_in_process(["compare.py", str(trained_run), "--output", str(tmp_path / "summary"), "--no_significance"])
    )
    assert "summary.md exists; pass --overwrite" in message and notes.read_text() == "my notes", message
    out = trained_run / "checkpoints" / "heatmap.png"
    message = one_error_line(run_in_process(["visualize.py", "pe-heatmap", "--output", str(out)]))
    assert "inside the run folder" in message and not out.exists(), message
    png = tmp_path / "heatmap.png"
    png.write_bytes(b"my photo")
    assert "exists; pass --overwrite" in one_error_line(
        run_in_process(["visualize.py", "pe-heatmap", "--output", str(png)])
    )
    assert png.read_bytes() == b"my photo"
    assert run_in_process(["visualize.py", "pe-heatmap", "--output", str(png), "--overwrite"]).returncode == 0
    pdf = tmp_path / "heatmap.pdf"  # the format its name says
    assert run_in_process(["visualize.py", "pe-heatmap", "--output", str(pdf)]).returncode == 0
    assert pdf.read_bytes().startswith(b"%PDF") and png.read_bytes().startswith(b"\x89PNG")
    # compare.py: a dot in the prefix stays part of the name; files are as readable as any
    assert (
        run_in_process(
            ["compare.py", str(trained_run), "--output", str(tmp_path / "v1.2"), "--no_significance"]
        ).returncode
        == 0
    )
    assert (tmp_path / "v1.2.md").read_text().startswith("| config |") and (tmp_path / "v1.2.json").is_file()
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "v1.2.md").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.slow
def test_test_outputs_belong_to_their_own_run_and_split(trained_run: Path, tmp_path: Path) -> None:
    mine, other = copy_run(trained_run, tmp_path, "mine"), copy_run(trained_run, tmp_path, "other")
    before = snapshot(other)
    message = one_error_line(run_in_process(["test.py", "--run", str(mine), "--output", str(other / "test")]))
    assert f"inside the run folder {other}" in message and "would pass for that run's" in message, message
    link = tmp_path / "link"
    link.symlink_to(other / "checkpoints")
    one_error_line(run_in_process(["test.py", "--run", str(mine), "--output", str(link / "..")]))
    assert snapshot(other) == before
    # the valid split never lands in test/ (compare.py would read it as the test score)
    message = one_error_line(
        run_in_process(["test.py", "--run", str(mine), "--split", "valid", "--output", str(mine / "test")])
    )
    assert "run folder" in message and not (mine / "test").exists(), message
    assert "run folder" in one_error_line(
        run_in_process(  # only test/ itself is its own
            ["test.py", "--run", str(mine), "--output", str(mine / "test" / "deeper")]
        )
    )
    # an output folder outside any run is locked while test.py writes into it
    out = tmp_path / "scores"
    with RunLock(out, "another test.py"):  # held by this process: test.py runs as another one
        assert "in use by another process" in one_error_line(run(["test.py", "--run", str(mine), "--output", str(out)]))


def test_average_owns_only_checkpoints_averaged_files(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    (run_dir / "test" / "checkpoints").mkdir(parents=True)
    target = run_dir / "test" / "checkpoints" / "averaged_x.pt"
    assert "run folder" in one_error_line(
        run_in_process(["average.py", "--run", str(run_dir), "--average_last", "2", "--output", str(target)])
    )
    assert not target.exists()


def test_a_sweep_trains_on_when_it_asks_for_a_larger_budget(trained_run: Path, tmp_path: Path) -> None:
    runs_root = tmp_path / "runs"
    run_dir = runs_root / "demo" / "rope"
    shutil.copytree(trained_run, run_dir)
    assert run_in_process(["test.py", "--run", str(run_dir)]).returncode == 0
    sets = [
        x
        for s in tiny_sets(run_dir, tmp_path / "cache", steps=6)[1::2]
        if not s.startswith("run_dir=")
        for x in ("--set", s)
    ]
    proc = run_in_process(["sweep.py", ROPE, "--runs_root", str(runs_root), *sets])  # the budget it trained to: skipped
    assert proc.returncode == 0 and "skipped" in proc.stdout, proc.stderr[-2000:]
    proc = run_in_process(["sweep.py", ROPE, "--runs_root", str(runs_root), *with_sets(sets, "training.max_steps=8")])
    assert proc.returncode == 0 and "resuming" in proc.stdout, proc.stderr[-2000:]
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["event"] == "end"][-1] == 8


def test_resume_with_a_config_compares_it_with_the_run(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(trained_run, tmp_path)
    message = one_error_line(
        run_in_process(["train.py", "--config", CONFIG, *tiny_sets(run_dir, tmp_path / "cache"), "--resume"])
    )  # a sinusoidal config, a RoPE run
    assert "model.positional.name: 'rope' -> 'sinusoidal'" in message, message


@pytest.mark.slow
def test_compare_names_damaged_files_and_splits_decodings(trained_run: Path, tmp_path: Path) -> None:
    a, b = copy_run(trained_run, tmp_path, "a"), copy_run(trained_run, tmp_path, "b")
    assert run_in_process(["test.py", "--run", str(a)]).returncode == 0
    assert run_in_process(["test.py", "--run", str(b), "--set", "decoding.strategy=greedy"]).returncode == 0
    report = tmp_path / "sum"
    assert run_in_process(["compare.py", str(a), str(b), "--output", str(report), "--no_significance"]).returncode == 0
    assert [g["n"] for g in json.loads((tmp_path / "sum.json").read_text())["groups"]] == [1, 1]  # not 2 "seeds"
    assert "--bootstrap_samples must be at least 1" in one_error_line(
        run_in_process(["compare.py", str(a), "--bootstrap_samples", "0"])
    )
    scores = a / "test" / "scores.json"
    scores.write_text(scores.read_text()[:50])
    message = one_error_line(run_in_process(["compare.py", str(a)]))
    assert "scores.json is not readable JSON" in message, message
