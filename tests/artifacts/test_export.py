"""Export folders (artifacts/export.py): the model card's code is as ruff formats it, so that an export
inside a project passes its `make lint`."""

from __future__ import annotations

from pathlib import Path

from in_process import run_in_process as run


def test_the_model_card_is_formatted(trained_run: Path, tmp_path: Path) -> None:
    """The card's code is as ruff formats it: an export inside a project passes its `make lint`."""
    import subprocess
    import sys

    export = tmp_path / "ct2"
    assert (
        run(["export.py", "--run", str(trained_run), "--format", "ctranslate2", "--output", str(export)]).returncode
        == 0
    )
    card = export / "README.md"
    assert "import ctranslate2" in card.read_text()
    ruff = [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", str(card)]
    assert subprocess.run(ruff, capture_output=True, text=True).returncode == 0
