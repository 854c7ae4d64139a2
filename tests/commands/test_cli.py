"""One command layer: every command's flags come from commands/cli.py (the same names and meanings
everywhere), the README shows only flags the commands take, each command's old flag spellings still
work for one release with a one-line note and are not shown in --help, sweep.py calls functions
rather than other scripts' main(), and every command reports its errors in one line (exit 2)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, one_error_line
from in_process import run_in_process

SCRIPTS = ("train.py", "test.py", "inference.py", "compare.py", "sweep.py", "export.py", "average.py", "visualize.py")


SHARED = {"--config", "--run", "--set", "--model_path", "--device", "--overwrite", "--output"}


def parser_of(script: str, subcommand: str | None = None):
    """The argparse parser of a command (visualize.py: one of its subcommands)."""
    import argparse

    parser = importlib.import_module(f"commands.{script.removesuffix('.py')}").build_parser()
    if subcommand:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[subcommand]
    return parser


def flags_of(parser) -> dict[str, object]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def visible_flags(parser) -> set[str]:
    """The flags --help shows (deprecated spellings are hidden)."""
    import argparse

    return {flag for action in parser._actions if action.help != argparse.SUPPRESS for flag in action.option_strings}


def readme_command_lines() -> list[str]:
    """Every line of the README and its detail pages that runs an entry script, but for
    docs/MIGRATIONS.md (which names the old spellings on purpose)."""
    pages = ("README.md", "docs/CTRANSLATE2.md", "docs/GUARANTEES.md")
    text = "\n".join((ROOT / page).read_text(encoding="utf-8") for page in pages)
    return [line for line in text.splitlines() if re.search(r"python \w+\.py", line)]


def test_the_readme_uses_only_flags_the_commands_show() -> None:
    checked = set()
    for line in readme_command_lines():
        for match in re.finditer(r"python (\w+\.py)(?: ([\w-]+))?([^|`#;]*)", line):
            script, sub, rest = match.groups()
            if script not in SCRIPTS:
                continue
            sub = sub if script == "visualize.py" else None
            used = set(re.findall(r"(?<![\w-])(--[a-z_]+)", f"{match.group(2) or ''} {rest}")) - {"--help"}
            assert used <= visible_flags(parser_of(script, sub)), (
                line,
                sorted(used - visible_flags(parser_of(script, sub))),
            )
            checked.add(script)
    assert checked == set(SCRIPTS)  # every command is shown


@pytest.mark.parametrize(
    "script, old, new",
    [
        ("test.py", "--output_dir", "--output"),
        ("export.py", "--out", "--output"),
        ("inference.py", "--input", "--src"),
        ("visualize.py", "--src", "--src_text"),
        ("visualize.py", "--tgt", "--tgt_text"),
    ],
)
def test_old_flag_spellings_are_hidden_but_still_set_the_new_flag(script: str, old: str, new: str, capsys) -> None:
    sub = "attention" if script == "visualize.py" else None
    parser = parser_of(script, sub)
    assert old not in visible_flags(parser) and new in visible_flags(parser)
    required = {"export.py": [], "visualize.py": []}.get(script, [])
    args = parser.parse_args([*required, old, "x"])
    dest = next(a.dest for a in parser._actions if new in a.option_strings)
    assert getattr(args, dest) == "x"
    assert f"note: {old} is deprecated" in capsys.readouterr().err


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_command_spells_the_shared_flags_alike(script: str) -> None:
    parser = parser_of(script, "attention" if script == "visualize.py" else None)
    flags = flags_of(parser)
    for flag in SHARED & set(flags):
        action = flags[flag]
        assert action.dest == {"--set": "overrides"}.get(flag, flag.lstrip("-")), (script, flag)
    if "--overwrite" in flags:  # one meaning everywhere: replace what this command wrote before
        assert flags["--overwrite"].help.startswith("replace what this command wrote before"), script


@pytest.mark.parametrize(
    "args",
    [
        ["visualize.py", "attention", "--src_text", "Bonjour"],  # no model
        ["visualize.py", "pe-heatmap", "--encoding", "rope"],  # only sinusoidal without a model
        ["visualize.py", "attention", "--run", "no/such/run", "--src_text", "Bonjour"],
        ["visualize.py", "attention", "--model_path", "no/such.pt", "--src_text", "Bonjour"],
        ["export.py", "--run", "no/such/run", "--output", "somewhere"],
        ["export.py", "--model_path", "no/such.pt", "--output", "somewhere"],
        ["average.py", "--run", "no/such/run", "--average_last", "2"],
        ["average.py", "--average_last", "2"],
        ["train.py"],
    ],
)
def test_commands_report_errors_in_one_line(args: list[str], tmp_path: Path) -> None:
    args = [str(ROOT / args[0]), *args[1:]]
    line = one_error_line(run_in_process(args, cwd=tmp_path))
    assert len(line) < 400


def test_an_output_alias_is_the_same_flag(trained_run: Path, tmp_path: Path) -> None:
    """--output_dir (test.py's earlier name) writes where --output does, with a one-line note."""
    proc = run_in_process(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--output_dir",
            str(tmp_path / "scored"),
            "--set",
            "evaluation.teacher_forced=false",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "scored" / "scores.json").is_file()
    assert "note: --output_dir is deprecated and will be removed in the next release: use --output" in proc.stderr


@pytest.mark.parametrize(
    "args, says",
    [
        (["sweep.py", "missing.yaml", "--seeds", "1", "--seeds", "2"], "--seeds given twice (1, then --seeds 2)"),
        (["test.py", "--run", "runs/a", "--run", "runs/b"], "--run given twice (runs/a, then --run runs/b)"),
        (["compare.py", "x", "--output", "a", "--output", "b"], "--output given twice (a, then --output b)"),
        (
            ["test.py", "--run", "runs/a", "--concat", "1", "--concat", "2"],
            "give it once with all its values (--concat 1 2)",
        ),
        (["inference.py", "--run", "runs/a", "--beam_size", "2", "--beam_size", "5"], "--beam_size given twice"),
        (["visualize.py", "pe-heatmap", "--positions", "5", "--positions", "6"], "--positions given twice"),
        (
            ["train.py", "--config", "missing.yaml", "--set", "training.lr=1", "--set", "training.lr=2"],
            "--set training.lr given twice (training.lr=1, then training.lr=2): give it once",
        ),
        (
            ["sweep.py", "missing.yaml", "--set", "decoding.beam_size=2", "--set", " decoding.beam_size = 5"],
            "--set decoding.beam_size given twice",
        ),
    ],
)
def test_a_flag_given_twice_with_different_values_is_refused(args: list[str], says: str) -> None:
    """One flag, one value: the last would win without a word (round four). The inputs name nothing that
    exists, so that without the check each command fails fast on something else."""
    proc = run_in_process(args)
    assert proc.returncode == 2, proc.stderr
    assert says in one_error_line(proc)


def test_a_flag_given_twice_with_the_same_value_is_taken(tmp_path: Path) -> None:
    from commands.cli import check_one_value_per_key

    check_one_value_per_key(["training.lr=1", "decoding.beam_size=2", "training.lr=1"])  # one setting, twice
    out = tmp_path / "pe.png"
    proc = run_in_process(["visualize.py", "pe-heatmap", "--positions", "5", "--positions", "5", "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.is_file()


def test_src_and_ref_naming_one_file_and_a_variant_named_twice_are_refused(tmp_path: Path) -> None:
    same = tmp_path / "a.txt"
    same.write_text("Bonjour.\n")
    proc = run_in_process(
        ["test.py", "--run", "runs/a", "--src", str(same), "--ref", str(tmp_path / ".." / tmp_path.name / "a.txt")]
    )
    assert proc.returncode == 2 and "--src and --ref name the same file" in one_error_line(proc)
    twice = ["--variant", "v4", "model.positional.scaling=linear", "--variant", "v4", "model.positional.scaling=yarn"]
    proc = run_in_process(["sweep.py", "configs/demo/rope.yaml", *twice])
    assert proc.returncode == 2 and "--variant v4 given twice" in one_error_line(proc)


def test_a_k_above_the_test_sets_size_is_refused_before_decoding(trained_run: Path, tmp_path: Path) -> None:
    """A 3-pair test set with --concat 1 2 4 8 would score the one input of all 3 pairs as k = 4 and
    again as k = 8 (round four): refused, naming the largest K the file allows; from the config's
    evaluation.concat, those K are not scored and scores.json says which."""
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("Bonjour.\nMerci.\nAu revoir.\n")
    ref.write_text("Hello.\nThanks.\nGoodbye.\n")
    args = ["test.py", "--run", str(trained_run), "--src", str(src), "--ref", str(ref), "--output", str(tmp_path / "o")]
    proc = run_in_process([*args, "--concat", "1", "2", "4", "8"])
    assert proc.returncode == 2 and "has 3 pairs, so an input of 4 pairs" in one_error_line(proc)
    assert not (tmp_path / "o" / "scores.json").exists()
    assert run_in_process([*args, "--concat", "1", "3"]).returncode == 0
    # the run's own evaluation.concat (1, 2, 4, 8): the K above the size are not scored, and said so
    proc = run_in_process([*args, "--overwrite"])
    assert proc.returncode == 0 and "k = 4, 8 (evaluation.concat) not scored" in proc.stderr + proc.stdout
    scores = json.loads((tmp_path / "o" / "scores.json").read_text())
    assert scores["concat_not_scored"] == [4, 8] and [c["k"] for c in scores["concat"]] == [1, 2]


def test_old_mac_line_endings_are_read_as_line_breaks(trained_run: Path, tmp_path: Path) -> None:
    """Files with CR-only line ends (old Mac) are read as universal newlines read them: one pair per
    line, not one pair of the whole file (round four: 60 sentences scored as one pair)."""
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_bytes(b"Bonjour.\rMerci.\rAu revoir.\r")
    ref.write_bytes(b"Hello.\r\nThanks.\r\nGoodbye.\r\n")  # and Windows line ends beside them
    out = tmp_path / "o"
    proc = run_in_process(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--src",
            str(src),
            "--ref",
            str(ref),
            "--output",
            str(out),
            "--concat",
            "1",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "scores.json").read_text())["num_sentences"] == 3


def test_starting_a_copied_run_over_never_deletes_its_original(trained_run: Path, tmp_path: Path) -> None:
    """`cp -a runs/orig runs/copy; train.py --config runs/copy/config.yaml --overwrite`: the copied config
    names runs/orig as its run_dir, so --overwrite would empty the original (round four). Refused,
    naming both; the original keeps every file."""
    import shutil

    import yaml

    orig = tmp_path / "orig"
    shutil.copytree(trained_run, orig)
    recorded = yaml.safe_load((orig / "config.yaml").read_text())
    (orig / "config.yaml").write_text(yaml.safe_dump({**recorded, "run_dir": str(orig)}))  # as trained there
    copy = tmp_path / "copy"
    shutil.copytree(orig, copy)
    before = sorted(p.relative_to(orig) for p in orig.rglob("*"))
    for flag in ("--overwrite", "--resume"):
        proc = run_in_process(["train.py", "--config", str(copy / "config.yaml"), flag])
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert f"but its run_dir names {orig}" in one_error_line(proc) and f"--set run_dir={copy}" in proc.stderr
    assert sorted(p.relative_to(orig) for p in orig.rglob("*")) == before


def test_a_finished_run_resumed_with_a_smaller_budget_keeps_its_recorded_config(
    trained_run: Path, tmp_path: Path
) -> None:
    """`train.py --run R --set training.max_steps=3` on a finished 6-step run says it already finished;
    its config.yaml must still say what it trained with (compare.py files the run by it), while a resume
    that trains on records its new budget."""
    import shutil

    import yaml

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    before = (run / "config.yaml").read_text()
    proc = run_in_process(["train.py", "--run", str(run), "--set", "training.max_steps=3"])
    assert proc.returncode == 0 and "already finished" in proc.stderr + proc.stdout
    assert (run / "config.yaml").read_text() == before
    proc = run_in_process(["train.py", "--run", str(run), "--set", "training.max_steps=8"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert yaml.safe_load((run / "config.yaml").read_text())["training"]["max_steps"] == 8


def test_a_killed_writes_temporaries_are_cleaned_by_the_next_run_of_its_command(
    trained_run: Path, tmp_path: Path
) -> None:
    """What a killed compare.py, test.py or inference.py left half-written beside its outputs
    (.<name>.<random>.tmp) is removed by the next run of that command; a user's file of a similar name
    is not (round four: each rerun left them where they were)."""
    summary = tmp_path / "summary"
    stale = [tmp_path / ".summary_bleu.png.ab12cd.tmp", tmp_path / ".summary.md.x9.tmp"]
    mine = tmp_path / ".summary.md.notes"
    for path in (*stale, mine):
        path.write_text("partial")
    runs = [str(ROOT / "results" / "demo" / n) for n in ("sinusoidal", "rope")]
    assert run_in_process(["compare.py", *runs, "--no_significance", "--output", str(summary)]).returncode == 0
    assert not any(p.exists() for p in stale) and mine.exists()
    out = tmp_path / "out.en"
    left = tmp_path / ".out.en.k3j.tmp"
    left.write_text("Hello\n")
    proc = run_in_process(["inference.py", "--run", str(trained_run), "--src_text", "Bonjour.", "--output", str(out)])
    assert proc.returncode == 0 and out.is_file() and not left.exists()
    test_out = tmp_path / "t"
    test_out.mkdir()
    left = test_out / ".hypotheses.txt.q1.tmp"
    left.write_text("partial\n")
    assert (
        run_in_process(["test.py", "--run", str(trained_run), "--output", str(test_out), "--concat", "1"]).returncode
        == 0
    )
    assert (test_out / "scores.json").is_file() and not left.exists()


def test_a_test_stopped_before_its_scores_is_finished_by_the_same_command(trained_run: Path, tmp_path: Path) -> None:
    """test.py killed after its hypotheses (SIGKILL, or SIGTERM, whose message says to run the same command
    again) left test/ without scores.json, and the same command then refused until --overwrite (round
    four). Those files were never a result: the same command finishes the test; the same command
    again finds it done; another test over a finished one needs --overwrite."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    shutil.rmtree(run / "test", ignore_errors=True)
    (run / "test").mkdir()
    (run / "test" / "hypotheses.txt").write_text("half\n")  # what the killed test had written
    proc = run_in_process(["test.py", "--run", str(run), "--concat", "1"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (run / "test" / "scores.json").is_file() and (run / "test" / "hypotheses.txt").read_text() != "half\n"
    again = run_in_process(["test.py", "--run", str(run), "--concat", "1"])  # the same command: nothing to redo
    assert again.returncode == 0 and "already holds this test" in again.stdout, again.stdout
    other = run_in_process(["test.py", "--run", str(run), "--concat", "1", "2"])  # another test: refused
    assert other.returncode == 2 and "--overwrite" in one_error_line(other)


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


def test_a_tensor_larger_than_the_machine_is_one_line_naming_its_size() -> None:
    """Issue 67: a packed row of 100,000 tokens (inside pack_length's bound) ended in torch's CPU
    allocator traceback; a real failed allocation is one line naming the size and the keys that set it."""
    import torch

    from commands.cli import describe_failure

    try:
        torch.empty(2**62, dtype=torch.uint8)  # 4 EiB: no machine gives it
    except RuntimeError as e:
        error = e
    status, line = describe_failure(error)
    assert status == 2 and line.startswith("error: out of memory: one tensor needed ") and "\n" not in line
    assert "bytes" in line and "training.pack_length" in line
