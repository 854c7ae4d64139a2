"""Fixtures of the data tests: a grouped Tatoeba file and official splits that leak into training."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_samples import HELLO, LOVE, write_tatoeba, write_tsv

from settings.config import DataConfig


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
