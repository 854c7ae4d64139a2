"""The Tatoeba reader and its grouped split (data/readers.py): every translation of a source on one
side, grouped by the source side, exact duplicates once, deterministic under the seed."""

from __future__ import annotations

from pathlib import Path

from corpus_samples import HELLO, LOVE

from data.overlap import overlap_report
from data.readers import read_corpus, read_tatoeba
from settings.config import DataConfig


def split_of(splits: dict, pair: tuple[str, str]) -> list[str]:
    return [name for name, pairs in splits.items() for _ in range(pairs.count(pair))]


def test_tatoeba_split_keeps_all_translations_of_a_source_together(grouped_file: Path):
    held_out = 0
    for seed in range(1, 21):
        splits = read_tatoeba(grouped_file, "fr", "en", valid_size=5, test_size=7, seed=seed)
        assert (len(splits["valid"]), len(splits["test"])) == (5, 7)  # singletons fill the last slots
        homes = {name for en, fr in LOVE for name in split_of(splits, (fr, en))}
        assert len(homes) == 1, f"seed {seed}: the translations of 'Je t'aime' straddle {homes}"
        held_out += homes != {"train"}
        report = overlap_report(
            read_corpus(DataConfig(path=str(grouped_file), valid_size=5, test_size=7, split_seed=seed))
        )
        assert report["valid"]["source"]["count"] == report["test"]["source"]["count"] == 0
        assert report["test_vs_valid"]["source"]["count"] == 0
    assert held_out >= 2  # the group did land in valid/test for some seeds: the check had teeth


def test_tatoeba_split_groups_by_the_source_side(grouped_file: Path):
    for seed in range(1, 21):
        en_fr = read_tatoeba(grouped_file, "en", "fr", valid_size=5, test_size=7, seed=seed)
        assert len({name for pair in HELLO for name in split_of(en_fr, pair)}) == 1
        fr_en = read_tatoeba(grouped_file, "fr", "en", valid_size=5, test_size=7, seed=seed)
        assert len({name for en, fr in LOVE for name in split_of(fr_en, (fr, en))}) == 1


def test_tatoeba_exact_duplicates_are_kept_once(grouped_file: Path):
    splits = read_tatoeba(grouped_file, "fr", "en", valid_size=5, test_size=7, seed=1)
    everything = [pair for pairs in splits.values() for pair in pairs]
    assert len(everything) == 50 + len(LOVE) + len(HELLO) + 2  # 4 duplicate lines fewer than the file
    assert everything.count(("Merci.", "Thanks.")) == 1
    assert [p for p in everything if p[1] == "Help!"] == [("À l'aide\u00a0!", "Help!")]  # the first copy
    corpus = read_corpus(DataConfig(path=str(grouped_file), valid_size=5, test_size=7))
    assert overlap_report(corpus)["exact_duplicates_within_split"] == {"train": 0, "valid": 0, "test": 0}


def test_tatoeba_grouped_split_is_deterministic_under_the_seed(grouped_file: Path):
    a = read_tatoeba(grouped_file, "fr", "en", valid_size=5, test_size=7, seed=3)
    assert read_tatoeba(grouped_file, "fr", "en", valid_size=5, test_size=7, seed=3) == a
    b = read_tatoeba(grouped_file, "fr", "en", valid_size=5, test_size=7, seed=4)
    assert a["test"] != b["test"]
    assert sorted(p for s in a.values() for p in s) == sorted(p for s in b.values() for p in s)
