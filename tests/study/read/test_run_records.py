"""compare.py's runs read (study/read/run_records.py): a run's scores.json read with every
registered metric checked to be a number (a damaged or hand-edited file is one line with the test.py
command that rewrites it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from study.read.run_records import CompareError, read_scores


def scores_at(tmp_path: Path, text: str) -> Path:
    run = tmp_path / "run"
    (run / "test").mkdir(parents=True)
    (run / "config.yaml").write_text("name: x\n")
    (run / "test" / "scores.json").write_text(text)
    return run


def test_scores_are_read_and_their_metrics_checked(tmp_path: Path) -> None:
    run = scores_at(tmp_path, json.dumps({"sacrebleu": 27.5, "chrf": 50.1, "nltk_bleu4": 0.3}))
    assert read_scores(run, "test")["sacrebleu"] == 27.5
    assert read_scores(tmp_path / "untested", "test") == {}
    for text, says in (
        (json.dumps({"sacrebleu": "27.5"}), "'sacrebleu' is '27.5', not a number"),
        (json.dumps({"chrf": float("nan")}), "'chrf' is nan, not a number"),
        ("[1, 2]", "is not a scores object (it holds list)"),
        ("{cut", "is not readable JSON"),
    ):
        (run / "test" / "scores.json").write_text(text)
        with pytest.raises(CompareError) as error:
            read_scores(run, "test")
        assert says in str(error.value) and f"python test.py --run {run} --overwrite" in str(error.value)
