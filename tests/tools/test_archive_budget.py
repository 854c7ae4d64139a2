"""The archive's size budget: the tracked tree stays under 56 MiB (a GPU machine takes a 64 MiB copy
of it, with what a job carries) and no archived run's own files pass 400 KB (tools/archive.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from helpers import ROOT

from tools.archive import RUN_BUDGET, TREE_BUDGET, budget_units, over_budget, tracked_size


def test_the_tracked_tree_is_within_its_budget() -> None:
    size = tracked_size(ROOT)
    assert size <= TREE_BUDGET, (
        f"the tracked tree is {size / 2**20:.1f} MiB, over its {TREE_BUDGET / 2**20:.0f} MiB budget: "
        f"archive less (tools/archive.py) or store it more compactly"
    )


def test_every_archived_run_is_within_its_budget() -> None:
    units = budget_units(ROOT / "results")
    assert len(units) > 100  # every archived run and variant test is measured
    assert over_budget(ROOT / "results") == []


def test_the_budgets_catch_a_grown_run(tmp_path: Path) -> None:
    """Mutation check: 500 KB added to one archived run is named, and counts against the tree."""
    study = tmp_path / "results" / "demo"
    shutil.copytree(ROOT / "results" / "demo" / "rope", study / "rope")
    shutil.copytree(ROOT / "results" / "demo" / "sinusoidal", study / "sinusoidal")
    assert over_budget(tmp_path / "results") == []
    (study / "rope" / "test" / "extra.bin").write_bytes(os.urandom(500_000))
    assert over_budget(tmp_path / "results") == [
        f"{study / 'rope'} holds {budget_units(tmp_path / 'results')[study / 'rope'] / 1e3:.0f} KB "
        f"(budget {RUN_BUDGET / 1e3:.0f} KB)"
    ]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    assert tracked_size(tmp_path) == sum(p.stat().st_size for p in (tmp_path / "results").rglob("*") if p.is_file())
