"""One command layer: every entry script's flags come from utils/cli.py (the same names and meanings
everywhere), the README's command table uses only flags the commands take, sweep.py calls functions
rather than other scripts' main(), and every command reports its errors in one line (exit 2)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers import ROOT, one_error_line
from in_process import load_script, run_in_process

SCRIPTS = ("train.py", "test.py", "inference.py", "compare.py", "sweep.py", "export.py", "average.py", "visualize.py")
SHARED = {"--config", "--run", "--set", "--model_path", "--device", "--overwrite", "--output"}


def parser_of(script: str, subcommand: str | None = None):
    """The argparse parser a script builds (visualize.py: one of its subcommands)."""
    import argparse

    captured = []
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        captured.append(self)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture
    try:
        module = load_script(ROOT / script)
        with pytest.raises(SystemExit):
            (getattr(module, "parse_args", None) or module.main)(["--help"])
    finally:
        argparse.ArgumentParser.parse_args = original
    parser = captured[0]
    if subcommand:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[subcommand]
    return parser


def flags_of(parser) -> dict[str, object]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def readme_commands() -> list[str]:
    """The command cells of the README's "Commands" table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)`", section, flags=re.M)]


def test_the_readme_command_table_uses_only_flags_the_commands_take() -> None:
    rows = readme_commands()
    for script in SCRIPTS:  # every command is in the table
        assert any(f"python {script}" in row for row in rows), script
    checked = 0
    for row in rows:
        match = re.search(r"python (\w+\.py)(?: \{?([\w-]+))?", row)
        if not match or match.group(1) not in SCRIPTS:
            continue  # tensorboard, torchrun
        sub = match.group(2) if match.group(1) == "visualize.py" else None
        known = flags_of(parser_of(match.group(1), sub))
        used = set(re.findall(r"(?<![\w-])(--[a-z_]+)", row)) - {"--help"}
        assert used <= set(known), (row, sorted(used - set(known)))
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_command_spells_the_shared_flags_alike(script: str) -> None:
    parser = parser_of(script, "attention" if script == "visualize.py" else None)
    flags = flags_of(parser)
    for flag in SHARED & set(flags):
        action = flags[flag]
        assert action.dest == {"--set": "overrides"}.get(flag, flag.lstrip("-")), (script, flag)
    if "--output" in flags:  # one output flag; the earlier names stay as aliases of it
        assert flags["--out"] is flags["--output"] and flags["--output_dir"] is flags["--output"]
    else:
        assert "--out" not in flags and "--output_dir" not in flags


def test_sweep_calls_functions_not_scripts() -> None:
    """No script is loaded through importlib, and sweep.py passes no argument lists to a main()."""
    for script in [*SCRIPTS, *(str(p.relative_to(ROOT)) for p in (ROOT / "commands").glob("*.py"))]:
        tree = ast.parse((ROOT / script).read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(name.startswith("importlib") for name in imported), script
    sweep = ast.parse((ROOT / "sweep.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(sweep) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "main" and getattr(n.func.value, "id", "") in ("train", "test", "train_cmd", "test_cmd")]
    assert not calls


def test_sweep_help_prints_its_examples_intact() -> None:
    proc = run_in_process(["sweep.py", "--help"])
    assert proc.returncode == 0
    assert "configs/demo/learnable.yaml configs/demo/rope.yaml \\\n      --output runs/demo/summary" in proc.stdout


@pytest.mark.parametrize("args", [
    ["visualize.py", "attention", "--src", "Bonjour"],                       # no model
    ["visualize.py", "pe-heatmap", "--encoding", "rope"],                    # only sinusoidal without a model
    ["visualize.py", "attention", "--run", "no/such/run", "--src", "Bonjour"],
    ["visualize.py", "attention", "--model_path", "no/such.pt", "--src", "Bonjour"],
    ["export.py", "--run", "no/such/run", "--output", "somewhere"],
    ["export.py", "--model_path", "no/such.pt", "--output", "somewhere"],
    ["average.py", "--run", "no/such/run", "--average_last", "2"],
    ["average.py", "--average_last", "2"],
    ["train.py"],
])
def test_commands_report_errors_in_one_line(args: list[str], tmp_path: Path) -> None:
    args = [str(ROOT / args[0]), *args[1:]]
    line = one_error_line(run_in_process(args, cwd=tmp_path))
    assert len(line) < 400


def test_an_output_alias_is_the_same_flag(trained_run: Path, tmp_path: Path) -> None:
    """--output_dir (test.py's earlier name) writes where --output does."""
    proc = run_in_process(["test.py", "--run", str(trained_run), "--output_dir", str(tmp_path / "scored"),
                           "--set", "evaluation.teacher_forced=false"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "scored" / "scores.json").is_file()
