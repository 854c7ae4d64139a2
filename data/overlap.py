"""Train/valid/test overlap: one normalised key per sentence, and a report of what leaks.

A test sentence that also occurs in the training data (up to case, punctuation and spacing)
measures memorisation, not translation; Tatoeba has many French sentences with several English
translations, so a pair-level split leaks sources. `overlap_key` is the notion of "same
sentence" used both to group the Tatoeba split (data/readers.py) and to measure the leak here.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Iterable, Optional

Pairs = list[tuple[str, str]]

MAX_EXAMPLES = 5
ASPECTS = ("source", "target", "pair")


class _PunctuationToSpace(dict):
    """A `str.translate` table mapping every punctuation (P*) and symbol (S*) character to a
    space, filled lazily: a full Unicode table would cost ~1 s to build on every import."""

    def __missing__(self, code: int) -> int:
        value = 32 if unicodedata.category(chr(code))[0] in "PS" else code
        self[code] = value
        return value


_PUNCT_TO_SPACE = _PunctuationToSpace()


def overlap_key(text: str) -> str:
    """Casefolded text with punctuation and symbols replaced by spaces and whitespace collapsed.

    Replacing (not deleting) punctuation makes "t'aime" and "t aime" the same key, and
    "Je t'aime !" the same as "je t aime". NFKC first, so composed and decomposed accents and
    compatibility forms (ligatures, full-width letters) compare equal; accents are kept
    ("a" and "à" are different French words)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_PUNCT_TO_SPACE).split())


def _fraction(count: int, total: int) -> float:
    return round(count / total, 6) if total else 0.0


def _keys(pairs: Pairs) -> dict[str, list]:
    """The source, target and pair keys of every pair, computed once (the costly part)."""
    src = [overlap_key(s) for s, _ in pairs]
    tgt = [overlap_key(t) for _, t in pairs]
    return {"source": src, "target": tgt, "pair": list(zip(src, tgt))}


def _index(pairs: Pairs, keys: list) -> dict:
    """key -> the first pair with that key (the example shown for a match)."""
    index: dict = {}
    for key, pair in zip(keys, pairs):
        index.setdefault(key, pair)
    return index


def _measure(pairs: Pairs, keys: list, reference: dict, reference_name: str) -> dict:
    """How many of `pairs` have their key in `reference` (key -> one reference pair)."""
    count, examples = 0, []
    for key, pair in zip(keys, pairs):
        match = reference.get(key)
        if match is not None:
            count += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append({"pair": list(pair), reference_name: list(match)})
    return {"count": count, "fraction": _fraction(count, len(pairs)), "examples": examples}


def exact_duplicates(pairs: Pairs) -> int:
    """Pairs that repeat an earlier pair of the same list character for character."""
    return sum(n - 1 for n in Counter(pairs).values())


def overlap_report(splits: dict[str, Pairs]) -> dict:
    """Leak measurement of valid and test against train (sources, targets, whole pairs, all by
    `overlap_key`), of test sources against valid, and exact duplicates inside each split.

    Counts are pairs of the evaluated split; fractions are of that split's size. Sets and dicts
    only: linear in the corpus size (about a second for the 167k-pair Tatoeba file)."""
    keys = {name: _keys(pairs) for name, pairs in splits.items()}
    train, train_keys = splits.get("train", []), keys.get("train", _keys([]))
    report: dict = {
        "key": "casefold, punctuation/symbols -> space, whitespace collapsed (data/overlap.py)",
        "pairs": {name: len(pairs) for name, pairs in splits.items()},
        "exact_duplicates_within_split": {name: exact_duplicates(pairs) for name, pairs in splits.items()},
    }
    indexes = {aspect: _index(train, train_keys[aspect]) for aspect in ASPECTS}
    for name in ("valid", "test"):
        if name in splits:
            report[name] = {
                "against": "train",
                "pairs": len(splits[name]),
                **{aspect: _measure(splits[name], keys[name][aspect], indexes[aspect], "train") for aspect in ASPECTS},
            }
    if "valid" in splits and "test" in splits:
        valid_sources = _index(splits["valid"], keys["valid"]["source"])
        report["test_vs_valid"] = {
            "against": "valid",
            "pairs": len(splits["test"]),
            "source": _measure(splits["test"], keys["test"]["source"], valid_sources, "valid"),
        }
    return report


def overlap_summary(report: dict, split: str) -> Optional[str]:
    """One log line for an evaluated split of `overlap_report`, or None if it was not measured."""
    part = report.get(split)
    if part is None:
        return None
    src, tgt, pair = part["source"], part["target"], part["pair"]
    return (
        f"data: {split} overlap with train: {src['count']:,} sources ({100 * src['fraction']:.1f}%), "
        f"{tgt['count']:,} targets ({100 * tgt['fraction']:.1f}%), {pair['count']:,} pairs"
    )


def drop_overlapping_sources(train: Pairs, held_out: Iterable[Pairs]) -> tuple[Pairs, int]:
    """Training pairs whose source key occurs in none of `held_out`, and how many were dropped."""
    keys = {overlap_key(src) for pairs in held_out for src, _ in pairs}
    kept = [pair for pair in train if overlap_key(pair[0]) not in keys]
    return kept, len(train) - len(kept)
