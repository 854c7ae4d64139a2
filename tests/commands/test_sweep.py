"""sweep.py (commands/sweep.py): it calls the commands' functions, never another script's main(), and
its --help prints its examples intact. (Sweeps run for real: tests/commands/test_compare.py,
test_launchers.py, test_slurm.py and tests/guarantees/test_slurm_sweeps.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT, tiny_overrides, validations_by_command
from in_process import run_in_process


def outside_function(tree: ast.AST, name: str) -> list[ast.AST]:
    """The nodes of `tree` that are not inside the function `name`."""
    inside = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef) and function.name == name
        for node in ast.walk(function)
    }
    return [node for node in ast.walk(tree) if id(node) not in inside]


def test_sweep_calls_functions_not_scripts() -> None:
    """No command loads a script through importlib, and none passes argument lists to a main(). The one
    exception is the doors' own `cli.lazy_main` (that function only), which imports a command module
    inside main_guard (so a Ctrl-C while torch loads is one line) and is called by the entry scripts
    alone (tests/test_layers.py)."""
    for path in (ROOT / "commands").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = outside_function(tree, "lazy_main") if path.name == "cli.py" else list(ast.walk(tree))
        imported = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(name.startswith("importlib") for name in imported), path
        calls = [n for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "main"]
        assert not calls, path


def test_sweep_help_prints_its_examples_intact() -> None:
    proc = run_in_process(["sweep.py", "--help"])
    assert proc.returncode == 0
    assert "configs/demo/learnable.yaml configs/demo/rope.yaml \\\n      --output runs/demo/summary" in proc.stdout


@pytest.mark.slow
def test_a_sweep_validates_each_config_and_variant_once(tmp_path: Path, monkeypatch) -> None:
    """Issue 76: a one-config sweep validated its config 5 times (and 5 more per --variant), its
    overrides passed on as text and parsed again by each step. The sweep now validates each config
    once (its seeds and run folders typed updates) and each variant once per run, and hands them
    typed to training and to the variants' checks (commands/sweep_plan.py); test.py validates the
    config it tests (the checkpoint's own), compare.py each run folder's config.yaml it summarises
    (and its variant's);
    run again, the sweep reads each run folder's config.yaml once."""
    from commands.sweep import sweep

    sets = tiny_overrides(tmp_path / "unused", tmp_path / "cache", steps=2)[1::2]
    sets = [s for s in sets if not s.startswith("run_dir=")]
    asked = dict(
        configs=["configs/demo/rope.yaml"],
        overrides=sets,
        seeds=[1, 2],
        variant=[["greedy", "decoding.beam_size=1"]],
        runs_root=str(tmp_path / "runs"),
        output=str(tmp_path / "summary"),
    )
    counted = validations_by_command(monkeypatch)
    assert sweep(**asked) == 0
    assert [p.parent.parent.name for p in sorted((tmp_path / "runs").rglob("test_greedy/scores.json"))] == [
        "rope_seed1",
        "rope_seed2",
    ]
    # the sweep: the config, then the variant for each run; test.py: each run and its variant; compare.py:
    # each run's config.yaml and its variant (study/run_records.py)
    assert counted == {"sweep": 1 + 2, "test.py": 2 * 2, "compare.py": 2 * 2}
    counted.clear()
    assert sweep(**asked) == 0  # every run and variant scored: skipped
    assert counted == {"sweep": 1 + 2, "run folder": 2, "compare.py": 2 * 2}
