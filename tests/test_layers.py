"""The packages import one way (docs/DESIGN.md, "Layers"): entry scripts and commands (their work as
functions) -> training / evaluation -> models, data, tokenizer -> utils (config and runtime helpers),
which imports nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("commands", "training", "evaluation", "models", "data", "tokenizer", "utils")
MAY_IMPORT = {
    "commands": set(PACKAGES),
    "training": {"training", "evaluation", "models", "data", "tokenizer", "utils"},
    "evaluation": {"evaluation", "models", "data", "tokenizer", "utils"},
    "models": {"models"},
    "data": {"data", "utils"},
    "tokenizer": {"tokenizer", "utils"},
    "utils": {"utils"},
}
# The upward look-ups, done lazily: config validation asks the encoding registry for its names and
# options, the key roles for the roles of an encoding's options.
KNOWN_EXCEPTIONS = {("utils/config.py", "models"), ("utils/config_checks.py", "models"), ("utils/key_roles.py", "models")}


def project_imports(path: Path) -> set[str]:
    """Top-level project packages imported anywhere in the module (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found & set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_run_one_way(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules
    wrong = [f"{m.relative_to(ROOT)} imports {p}" for m in modules for p in sorted(project_imports(m))
             if p not in MAY_IMPORT[package] and (str(m.relative_to(ROOT)), p) not in KNOWN_EXCEPTIONS]
    assert not wrong, wrong


def test_the_checker_sees_function_level_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from training.engine import create_trainer\n    import models\n")
    assert project_imports(module) == {"training", "models"}
