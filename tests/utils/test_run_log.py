"""What a run writes as it goes (utils/run_log.py): the metrics log (one JSON object per line; a
resume's history drops what an interrupted attempt logged after its step), and no torch underneath,
so that the tools reading run folders (the study runner's checks, the archive) start at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from utils.run_log import JsonlLogger


def test_the_metrics_log_and_a_resumes_history(tmp_path: Path) -> None:
    log = JsonlLogger(tmp_path / "metrics.jsonl")
    assert log.read() == []
    log.write("start", step=0)
    for step in (100, 200, 300):
        log.write("train", step=step, loss=1.0)
    log.write("start", step=200, resume=True)  # an attempt killed after step 300 resumes from step 200
    log.write("train", step=300, loss=0.9)
    assert [(r["event"], r["step"]) for r in log.history()] == [
        ("start", 0),
        ("train", 100),
        ("train", 200),
        ("start", 200),
        ("train", 300),
    ]
    assert len(log.read("train")) == 4
    with open(log.path, "a") as f:
        f.write("[1, 2]\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl:7: not a JSON object"):
        log.read()


@pytest.mark.parametrize("module", ["utils.run_log", "utils.provenance", "study.read.declared", "tools.study_ready"])
def test_the_run_folder_readers_start_without_torch(module: str) -> None:
    # tools/study_ready.py runs twice for each run the study runner commits: importing torch there
    # cost 1.4 s a call
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
