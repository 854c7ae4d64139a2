"""Tatoeba reader and splits (data/readers.py), encoding and the encoded-split cache (data/pipeline.py,
data/__init__.py). Batching and collation: test_batching.py."""

from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path

import pytest

from data import prepare_splits
from data.parallel_text import CorpusError
from data.pipeline import EncodedSplit, cache_key, encode_split, load_or_encode
from data.readers import corpus_fingerprint, normalize_text, read_corpus, read_tatoeba
from settings.config import DataConfig

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "corpora" / "tatoeba-fr-en" / "fra-eng.tsv.gz"
ATTRIBUTION = "CC-BY 2.0 (France) Attribution: tatoeba.org #{a} (someone) & #{b} (someone else)"


# ----------------------------------------------------------------------------- fixtures


def make_pairs(n: int = 60) -> list[tuple[str, str]]:
    """(English, French) pairs, unique, a few with French no-break spaces before ! and ?."""
    pairs = [(f"Sentence number {i}.", f"Phrase numéro {i}.") for i in range(n - 4)]
    pairs += [
        ("Hello!", "Bonjour\u00a0!"),
        ("Who are you?", "Qui êtes-vous\u202f?"),
        ("Really?", "Vraiment\u00a0?"),
        ("Help me!", "Aidez-moi\u202f!"),
    ]
    pairs.sort(key=lambda p: len(p[0]))  # the real file is sorted by length
    return pairs


@pytest.fixture
def tatoeba_file(tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    pairs = make_pairs()
    path = tmp_path / "fra-eng.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, (en, fr) in enumerate(pairs):
            f.write(f"{en}\t{fr}\t{ATTRIBUTION.format(a=2 * i, b=2 * i + 1)}\n")
    return path, pairs


class WordTokenizer:
    """A stand-in tokenizer: one id per whitespace word (hash-free, deterministic)."""

    def __init__(self, tag: str = "v1") -> None:
        self.tag = tag
        self.calls = 0

    def _encode(self, text: str) -> list[int]:
        return [4 + len(w) for w in text.split()]

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        self.calls += 1
        return [self._encode(t) for t in texts]

    encode_tgt_batch = encode_src_batch

    @property
    def fingerprint(self) -> str:
        return f"word-{self.tag}"


# ----------------------------------------------------------------------------- readers


def test_read_tatoeba_splits_sizes_disjoint_and_complete(tatoeba_file):
    path, pairs = tatoeba_file
    splits = read_tatoeba(path, "fr", "en", valid_size=5, test_size=7, seed=1)
    assert (len(splits["train"]), len(splits["valid"]), len(splits["test"])) == (len(pairs) - 12, 5, 7)
    everything = splits["train"] + splits["valid"] + splits["test"]
    assert len(set(everything)) == len(everything)  # disjoint (the pairs are unique)
    assert sorted(everything) == sorted((fr, en) for en, fr in pairs)  # all lines, nothing else


def test_read_tatoeba_french_is_source(tatoeba_file):
    path, pairs = tatoeba_file
    french = {fr for _, fr in pairs}
    english = {en for en, _ in pairs}
    fr_en = read_tatoeba(path, "fr", "en", 5, 7, seed=1)
    for split in fr_en.values():
        assert all(src in french and tgt in english for src, tgt in split)
    en_fr = read_tatoeba(path, "en", "fr", 5, 7, seed=1)
    assert en_fr["test"] == [(t, s) for s, t in fr_en["test"]]


def test_read_tatoeba_is_seeded_not_positional(tatoeba_file):
    path, pairs = tatoeba_file
    a = read_tatoeba(path, "fr", "en", 5, 7, seed=1)
    b = read_tatoeba(path, "fr", "en", 5, 7, seed=1)
    c = read_tatoeba(path, "fr", "en", 5, 7, seed=2)
    assert a == b
    assert a["test"] != c["test"] and a["valid"] != c["valid"]
    # Not the first/last lines of the length-sorted file.
    in_order = [(fr, en) for en, fr in pairs]
    assert a["test"] != in_order[:7] and a["test"] != in_order[-7:]


def test_read_tatoeba_errors(tmp_path: Path, tatoeba_file):
    path, pairs = tatoeba_file
    with pytest.raises(CorpusError, match="too few"):
        read_tatoeba(path, "fr", "en", valid_size=len(pairs), test_size=1, seed=1)
    with pytest.raises(CorpusError, match="src_lang"):
        read_tatoeba(path, "de", "en", 5, 7, seed=1)
    with pytest.raises(CorpusError, match="not found"):
        read_tatoeba(tmp_path / "missing.tsv.gz", "fr", "en", 5, 7, seed=1)
    bad = tmp_path / "bad.tsv"
    bad.write_text("only one field\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=":1:"):
        read_tatoeba(bad, "fr", "en", 0, 0, seed=1)


def test_normalize_text():
    assert normalize_text("Bonjour\u00a0!") == "Bonjour !"
    assert normalize_text("Qui\u202f?") == "Qui ?"
    assert normalize_text("  a \t b\u2009c  ") == "a b c"
    assert normalize_text("") == ""


def test_read_corpus_normalises_no_break_spaces(tatoeba_file):
    path, _ = tatoeba_file
    cfg = DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7, split_seed=3)
    splits = read_corpus(cfg)
    texts = [t for pairs in splits.values() for pair in pairs for t in pair]
    assert not any("\u00a0" in t or "\u202f" in t for t in texts)
    sources = {s for pairs in splits.values() for s, _ in pairs}
    assert {"Bonjour !", "Qui êtes-vous ?", "Vraiment ?", "Aidez-moi !"} <= sources


def test_read_corpus_max_train_pairs(tatoeba_file):
    path, _ = tatoeba_file
    cfg = DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7, max_train_pairs=10)
    full = read_corpus(DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7))
    capped = read_corpus(cfg)
    assert len(capped["train"]) == 10
    assert set(capped["train"]) <= set(full["train"])
    assert capped["valid"] == full["valid"] and capped["test"] == full["test"]
    assert read_corpus(cfg) == capped


@pytest.mark.slow
def test_shipped_corpus_sizes(shipped_corpus):
    sizes = {k: len(v) for k, v in shipped_corpus.items()}
    # 167,130 lines, 151 of them repeat an earlier pair (after normalize_text) and are kept once.
    assert sizes == {"train": 166_979 - 4000, "valid": 2000, "test": 2000}
    assert sum(sizes.values()) == 166_979
    # About 10k French lines have no-break spaces in the file; none survive normalisation.
    assert not any("\u00a0" in s or "\u202f" in s for pairs in shipped_corpus.values() for s, _ in pairs)


# ----------------------------------------------------------------------------- encoding


def test_encode_split_drops_and_counts():
    pairs = [
        ("un deux", "one two"),  # kept
        ("", "empty source"),  # empty
        ("empty target", "   "),  # empty
        ("a b c d e f", "x"),  # source too long (max_len 5)
        ("a", "t t t t t t"),  # target too long
        ("a b c d e", "t t t t t"),  # exactly max_len: kept
    ]
    out = encode_split(pairs, WordTokenizer(), max_len=5)
    assert out.dropped == {"empty": 2, "too_long": 2, "above_train_max_src_len": 0}
    assert out.raw_src == ["un deux", "a b c d e"] and out.raw_tgt == ["one two", "t t t t t"]
    assert [len(s) for s in out.src] == [2, 5] and [len(t) for t in out.tgt] == [2, 5]
    assert len(out) == 2


def test_train_max_src_len_filters_by_source_only():
    pairs = [("a b c", "x"), ("a b c d", "x"), ("a", "t t t t t t t t")]
    out = encode_split(pairs, WordTokenizer(), max_len=10, max_src_len=3)
    assert out.dropped == {"empty": 0, "too_long": 0, "above_train_max_src_len": 1}
    assert out.raw_src == ["a b c", "a"]  # a long *target* with a short source is kept


# ----------------------------------------------------------------------------- cache


def test_cache_key_depends_on_every_input():
    info = {"source": "tatoeba", "path": "/x:10:5", "split_seed": 1}
    key = cache_key(info, "train", "tokA", 128, None)
    assert key == cache_key(dict(info), "train", "tokA", 128, None)  # stable
    assert key == cache_key(dict(reversed(list(info.items()))), "train", "tokA", 128, None)  # key order
    variants = [
        cache_key(info, "train", "tokB", 128, None),
        cache_key(info, "train", "tokA", 256, None),
        cache_key(info, "valid", "tokA", 128, None),
        cache_key(info, "train", "tokA", 128, 64),
        cache_key({**info, "split_seed": 2}, "train", "tokA", 128, None),
        cache_key({**info, "path": "/x:11:5"}, "train", "tokA", 128, None),
    ]
    assert key not in variants and len(set(variants)) == len(variants)


def test_corpus_fingerprint_tracks_the_file(tatoeba_file):
    path, _ = tatoeba_file
    cfg = DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7)
    fp = corpus_fingerprint(cfg)
    assert fp == corpus_fingerprint(cfg)
    assert corpus_fingerprint(DataConfig(source="tatoeba", path=str(path), valid_size=6, test_size=7)) != fp
    assert (
        corpus_fingerprint(DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7, split_seed=9)) != fp
    )
    with gzip.open(path, "at", encoding="utf-8") as f:
        f.write("One more.\tEncore une.\tx\n")
    assert corpus_fingerprint(cfg) != fp


def test_corpus_fingerprint_sees_edits_that_keep_size_and_timestamp(tmp_path: Path):
    """The report's stale cache: an edited corpus must never reuse encodings of the old one."""
    path = tmp_path / "pairs.tsv"
    path.write_text("Hello.\tBonjour.\n", encoding="utf-8")
    cfg = DataConfig(source="tatoeba", path=str(path), valid_size=1, test_size=1)
    before, stat = corpus_fingerprint(cfg), path.stat()
    path.write_text("Hellp.\tBonjour.\n", encoding="utf-8")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same timestamp
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    after = corpus_fingerprint(cfg)
    assert after != before
    moved = tmp_path / "moved.tsv"
    path.rename(moved)  # a moved (or re-cloned) corpus keeps its identity: caches are reused
    assert corpus_fingerprint(DataConfig(source="tatoeba", path=str(moved), valid_size=1, test_size=1)) == after


def test_load_or_encode_writes_once_then_reuses(tmp_path: Path):
    calls = Counter()
    pairs = [("un deux", "one two"), ("trois", "three"), ("", "dropped")]

    def pairs_fn():
        calls["pairs"] += 1
        return pairs

    tok = WordTokenizer()
    first, hit = load_or_encode(pairs_fn, tmp_path / "cache", "k1", tok, max_len=10)
    assert not hit and calls["pairs"] == 1
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k1.pt"]  # no temp file left
    second, hit = load_or_encode(pairs_fn, tmp_path / "cache", "k1", tok, max_len=10)
    assert hit and calls["pairs"] == 1 and tok.calls == 2  # neither the corpus nor the tokenizer ran again
    assert second.__dict__ == first.__dict__
    assert second.dropped["empty"] == 1
    # Another key is another file.
    _, hit = load_or_encode(pairs_fn, tmp_path / "cache", "k2", tok, max_len=10)
    assert not hit and calls["pairs"] == 2


def test_load_or_encode_rebuilds_a_corrupt_cache(tmp_path: Path):
    calls = Counter()

    def pairs_fn():
        calls["pairs"] += 1
        return [("un deux", "one two")]

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "k.pt").write_bytes(b"not a torch file at all")
    split, hit = load_or_encode(pairs_fn, cache, "k", WordTokenizer(), max_len=10)
    assert not hit and calls["pairs"] == 1 and split.raw_src == ["un deux"]
    again, hit = load_or_encode(pairs_fn, cache, "k", WordTokenizer(), max_len=10)
    assert hit and calls["pairs"] == 1 and again.raw_src == ["un deux"]


def test_load_or_encode_without_cache_dir(tmp_path: Path):
    split, hit = load_or_encode(lambda: [("a", "b")], None, "k", WordTokenizer(), max_len=10)
    assert not hit and isinstance(split, EncodedSplit) and len(split) == 1


def test_prepare_splits_caches_and_invalidates(tatoeba_file, tmp_path: Path):
    path, _ = tatoeba_file
    cfg = DataConfig(
        source="tatoeba", path=str(path), valid_size=5, test_size=7, max_len=10, cache_dir=str(tmp_path / "cache")
    )
    reads = Counter()

    def corpus():
        reads["n"] += 1
        return read_corpus(cfg)

    logs: list[str] = []
    out = prepare_splits(cfg, WordTokenizer(), corpus=corpus, log=logs.append)
    assert {k: len(v) for k, v in out.items()} == {"train": 48, "valid": 5, "test": 7}
    assert reads["n"] == 3 and all("encoded" in line for line in logs)
    logs.clear()
    again = prepare_splits(cfg, WordTokenizer(), corpus=corpus, log=logs.append)
    assert reads["n"] == 3 and all("cached" in line for line in logs)  # corpus not read again
    assert again["train"].raw_src == out["train"].raw_src
    # A different tokenizer must not reuse the tensors encoded by the old one.
    logs.clear()
    prepare_splits(cfg, WordTokenizer(tag="v2"), splits=("valid",), corpus=corpus, log=logs.append)
    assert reads["n"] == 4 and "encoded" in logs[0]


def test_prepare_splits_empty_split_is_a_clear_error(tatoeba_file, tmp_path: Path):
    path, _ = tatoeba_file
    cfg = DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7, max_len=1, cache_dir="")
    with pytest.raises(ValueError, match="max_len"):
        prepare_splits(cfg, WordTokenizer(), splits=("train",), log=lambda _: None)


def test_prepare_splits_keeps_every_valid_and_test_pair(tatoeba_file):
    """data.max_len filters training pairs only: held-out splits are scored whole."""
    path, _ = tatoeba_file
    cfg = DataConfig(source="tatoeba", path=str(path), valid_size=5, test_size=7, max_len=1, cache_dir="")
    logs: list[str] = []
    out = prepare_splits(cfg, WordTokenizer(), splits=("valid", "test"), log=logs.append)
    assert len(out["valid"]) == 5 and len(out["test"]) == 7
    assert all(not v for split in out.values() for v in split.dropped.values())
    assert any("all kept for scoring" in line for line in logs)
