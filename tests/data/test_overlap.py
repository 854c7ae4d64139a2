"""Train/valid/test overlap (data/overlap.py): the normalised key, the report of planted leaks, and
dropping exactly the leaking training pairs; the shipped corpus has no source leak."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from corpus_samples import planted_splits

from data.overlap import exact_duplicates, overlap_key, overlap_report
from data.readers import read_corpus
from settings.config import DataConfig

ROOT = Path(__file__).resolve().parents[2]


SHIPPED = ROOT / "data" / "corpora" / "tatoeba-fr-en" / "fra-eng.tsv.gz"


def test_overlap_key_ignores_case_punctuation_and_spacing():
    assert overlap_key("Je t'aime !") == overlap_key("je t aime") == "je t aime"
    assert overlap_key("t'aime") == overlap_key("t aime") == overlap_key("T’AIME…")
    assert overlap_key("Qui êtes-vous\u202f?") == "qui êtes vous"
    assert overlap_key("« Bonjour », dit-il.") == "bonjour dit il"
    assert overlap_key("Ça coûte 5 € + 3 $.") == "ça coûte 5 3"  # symbols (S*) go too
    assert overlap_key("Cafe\u0301") == overlap_key("Café")  # decomposed accent == composed one
    assert overlap_key("à") != overlap_key("a")  # accents are kept: different French words
    assert overlap_key("") == overlap_key(" !? ") == ""


def counts(part: dict) -> dict[str, int]:
    return {aspect: part[aspect]["count"] for aspect in ("source", "target", "pair")}


def test_overlap_report_counts_planted_leaks():
    report = overlap_report(planted_splits())
    assert report["pairs"] == {"train": 6, "valid": 3, "test": 5}
    assert report["exact_duplicates_within_split"] == {"train": 1, "valid": 0, "test": 1}
    assert counts(report["test"]) == {"source": 2, "target": 2, "pair": 1}
    assert [report["test"][a]["fraction"] for a in ("source", "target", "pair")] == [0.4, 0.4, 0.2]
    assert counts(report["valid"]) == {"source": 1, "target": 0, "pair": 0}
    assert report["valid"]["source"]["fraction"] == pytest.approx(1 / 3, abs=1e-6)
    assert report["test_vs_valid"]["source"]["count"] == 2
    assert report["test_vs_valid"]["source"]["fraction"] == 0.4
    # Each example shows the evaluated pair and the first pair it matched.
    assert report["test"]["source"]["examples"] == [
        {"pair": ["je t aime", "I adore you."], "train": ["Je t'aime !", "I love you."]},
        {"pair": ["il pleut", "It is raining!"], "train": ["Il pleut.", "It is raining."]},
    ]
    assert report["test"]["target"]["examples"][1] == {"pair": ["Salut.", "hello"], "train": ["Bonjour.", "Hello."]}
    assert report["test_vs_valid"]["source"]["examples"][0] == {
        "pair": ["Nouveau.", "New."],
        "valid": ["nouveau", "new"],
    }
    json.dumps(report)  # serialisable as is


def test_overlap_report_caps_examples_and_handles_missing_or_empty_splits():
    train = [(f"Phrase {i}.", f"Sentence {i}.") for i in range(8)]
    report = overlap_report({"train": train, "test": [(s.upper(), t) for s, t in train], "valid": []})
    assert counts(report["test"]) == {"source": 8, "target": 8, "pair": 8}
    assert len(report["test"]["source"]["examples"]) == 5
    assert counts(report["valid"]) == {"source": 0, "target": 0, "pair": 0}
    assert report["valid"]["source"]["fraction"] == 0.0
    assert "valid" not in overlap_report({"train": train, "test": train})
    assert exact_duplicates([("a", "b"), ("a", "b"), ("a", "b"), ("a", "c")]) == 2


@pytest.mark.slow
def test_shipped_corpus_has_no_source_leak():
    """The default config on the shipped corpus: no French test/valid sentence (up to case,
    punctuation, spacing) is in train, and test and valid share none. The old pair-level split
    had 211 test and 224 valid sources in train."""
    start = time.perf_counter()
    splits = read_corpus(DataConfig(path=str(SHIPPED)))
    report = overlap_report(splits)
    elapsed = time.perf_counter() - start
    train = {overlap_key(src) for src, _ in splits["train"]}
    valid = {overlap_key(src) for src, _ in splits["valid"]}
    test = {overlap_key(src) for src, _ in splits["test"]}
    assert (len(splits["valid"]), len(splits["test"])) == (2000, 2000)
    assert not test & train and not valid & train and not test & valid
    for name in ("valid", "test"):
        assert report[name]["source"]["count"] == report[name]["pair"]["count"] == 0
    assert report["test_vs_valid"]["source"]["count"] == 0
    assert report["exact_duplicates_within_split"] == {"train": 0, "valid": 0, "test": 0}
    assert elapsed < 30, f"reading and measuring the shipped corpus took {elapsed:.1f} s"


def test_drop_train_overlap_drops_exactly_the_leaking_training_pairs(official_splits: DataConfig):
    cfg = official_splits
    kept = read_corpus(cfg)
    assert len(kept["train"]) == 6 and overlap_report(kept)["test"]["source"]["count"] == 1
    cfg.drop_train_overlap = True
    dropped = read_corpus(cfg)
    assert dropped["train"] == [("Bonjour.", "Hello."), ("Au revoir.", "Goodbye."), ("Il pleuvait.", "It was raining.")]
    assert dropped["valid"] == kept["valid"] and dropped["test"] == kept["test"]  # never re-split
    report = overlap_report(dropped)
    assert report["valid"]["source"]["count"] == report["test"]["source"]["count"] == 0
    assert report["test"]["target"]["count"] == 1  # only sources are dropped
    assert dropped.dropped_for_overlap == 3 and kept.dropped_for_overlap == 0
