"""Preparing a run's data (data/__init__.py): the data report written as JSON with one log line per
split, what drop_train_overlap removed recorded in it and in the cache key."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from data import write_data_report
from data.readers import corpus_fingerprint, read_corpus
from utils.config import DataConfig


def planted_splits() -> dict[str, list[tuple[str, str]]]:
    """Known leaks: each comment says what the pair shares with train (or valid)."""
    train = [
        ("Je t'aime !", "I love you."),
        ("Il pleut.", "It is raining."),
        ("Bonjour.", "Hello."),
        ("Bonjour.", "Hello."),  # exact duplicate inside train
        ("bonjour", "Hello."),  # the same up to case and punctuation: not an exact duplicate
        ("Merci.", "Thanks."),
    ]
    valid = [
        ("MERCI", "thank you"),  # source only (case, punctuation)
        ("Autre chose.", "Something else."),  # nothing
        ("nouveau", "new"),
    ]  # nothing with train; the source of two test pairs
    test = [
        ("je t aime", "I adore you."),  # source only
        ("il pleut", "It is raining!"),  # source, target and so the pair
        ("Salut.", "hello"),  # target only
        ("Nouveau.", "New."),  # nothing with train; source in valid
        ("Nouveau.", "New."),
    ]  # exact duplicate inside test
    return {"train": train, "valid": valid, "test": test}


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


def write_tatoeba(path: Path, pairs: list[tuple[str, str]]) -> Path:
    """(English, French) pairs as the manythings.org export writes them."""
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, (en, fr) in enumerate(pairs):
            f.write(f"{en}\t{fr}\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}\n")
    return path


LOVE = [("I love you.", "Je t'aime."), ("I'm in love with you.", "Je t'aime."), ("Love you!", "je t'aime !")]


HELLO = [("Hello.", "Bonjour."), ("Hello.", "Salut.")]  # one English source, two French ones


@pytest.fixture
def grouped_file(tmp_path: Path) -> Path:
    pairs = [(f"Sentence number {i}.", f"Phrase numéro {i}.") for i in range(50)]
    pairs += LOVE + HELLO
    pairs += [
        ("Thanks.", "Merci."),
        ("Thanks.", "Merci."),  # exact duplicate
        ("Help!", "À l'aide\u00a0!"),
        ("Help!", "À l'aide !"),
    ]  # duplicate after normalize_text
    pairs.sort(key=lambda p: len(p[0]))  # the real file is sorted by length
    return write_tatoeba(tmp_path / "fra-eng.tsv.gz", pairs)


def write_tsv(path: Path, pairs: list[tuple[str, str]]) -> dict:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return {"tsv": str(path)}


@pytest.fixture
def official_splits(tmp_path: Path) -> DataConfig:
    train = [
        ("Il pleut.", "It is raining."),  # test source, verbatim: dropped
        ("IL PLEUT !", "It's raining!"),  # the same, case and punctuation: dropped
        ("Merci beaucoup.", "Thank you very much."),  # valid source: dropped
        ("Bonjour.", "Hello."),  # target shared with test only: kept
        ("Au revoir.", "Goodbye."),
        ("Il pleuvait.", "It was raining."),
    ]  # a different sentence: kept
    valid = [("merci beaucoup", "Thanks a lot.")]
    test = [("Il pleut.", "It rains."), ("Salut.", "Hello.")]
    return DataConfig(
        source="parallel_text",
        train=write_tsv(tmp_path / "train.tsv", train),
        valid=write_tsv(tmp_path / "valid.tsv", valid),
        test=write_tsv(tmp_path / "test.tsv", test),
    )


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
