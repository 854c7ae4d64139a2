"""sweep.py (commands/sweep.py): it calls the commands' functions, never another script's main(), and
its --help prints its examples intact. (Sweeps run for real: tests/commands/test_compare.py,
test_launchers.py, test_slurm.py and tests/guarantees/test_slurm_sweeps.py.)"""

from __future__ import annotations

import ast

from helpers import ROOT
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
