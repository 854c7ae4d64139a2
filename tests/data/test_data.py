"""Preparing a run's data (data/__init__.py): the data report written as JSON with one log line per
split, what drop_train_overlap removed recorded in it and in the cache key."""

from __future__ import annotations

import json
from pathlib import Path

from corpus_samples import planted_splits

from data import write_data_report
from data.readers import corpus_fingerprint, read_corpus
from settings.config import DataConfig


def test_write_data_report_is_json_and_logs_one_line_per_split(tmp_path: Path):
    path = tmp_path / "run" / "data_report.json"
    logs: list[str] = []
    report = write_data_report(planted_splits(), path, log=logs.append)
    assert json.loads(path.read_text(encoding="utf-8")) == report
    assert logs == [
        "data: valid overlap with train: 1 sources (33.3%), 0 targets (0.0%), 0 pairs",
        "data: test overlap with train: 2 sources (40.0%), 2 targets (40.0%), 1 pairs",
    ]
    write_data_report({"train": [("a", "b")], "test": [("c", "d")]}, path, log=logs.append)  # overwrites
    assert json.loads(path.read_text(encoding="utf-8"))["pairs"] == {"train": 1, "test": 1}
    assert sorted(p.name for p in path.parent.iterdir()) == ["data_report.json"]  # no temp file left


def test_the_data_report_records_what_drop_train_overlap_removed(official_splits: DataConfig, tmp_path: Path):
    official_splits.drop_train_overlap = True
    logs: list[str] = []
    report = write_data_report(read_corpus(official_splits), tmp_path / "data_report.json", logs.append)
    assert report["train_pairs_dropped_for_overlap"] == 3
    assert json.loads((tmp_path / "data_report.json").read_text())["train_pairs_dropped_for_overlap"] == 3
    assert any("removed 3 training pairs" in line for line in logs)


def test_drop_train_overlap_is_in_the_cache_key(official_splits: DataConfig, grouped_file: Path):
    off = corpus_fingerprint(official_splits)
    official_splits.drop_train_overlap = True
    assert corpus_fingerprint(official_splits) != off
    tatoeba = DataConfig(path=str(grouped_file), valid_size=5, test_size=7)
    grouped = read_corpus(tatoeba)
    tatoeba.drop_train_overlap = True
    assert read_corpus(tatoeba) == grouped  # the grouped split has nothing to drop
