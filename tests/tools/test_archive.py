"""`make archive` copies each tested run into results/ without what compare.py does not need:
config, metrics, the test outputs and every variant test (<run>/test_<name>/), but no test sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helpers import ROOT


def test_archive_keeps_variant_tests_and_drops_sources(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    run = tmp_path / "runs" / "length" / "rope"
    for folder in ("test", "test_yarn4", "checkpoints"):
        (run / folder).mkdir(parents=True)
    for name in ("config.yaml", "metrics.jsonl", "training_lengths.json", "checkpoints/best.pt"):
        (run / name).write_text(name)
    for folder in ("test", "test_yarn4"):
        (run / folder / "scores.json").write_text("{}")
        (run / folder / "hypotheses.txt").write_text("a\n")
        (run / folder / "sources.txt").write_text("s\n")
    (run / "test_unscored").mkdir()  # a variant test cut short: no scores, not archived
    (run / "test_unscored" / "hypotheses.txt").write_text("a\n")
    subprocess.run(["make", "-s", "archive"], cwd=tmp_path, check=True, capture_output=True, text=True)
    out = tmp_path / "results" / "length" / "rope"
    kept = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert kept == [
        "config.yaml",
        "metrics.jsonl",
        "test/hypotheses.txt",
        "test/scores.json",
        "test_yarn4/hypotheses.txt",
        "test_yarn4/scores.json",
        "training_lengths.json",
    ]
