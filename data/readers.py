"""Corpus readers behind one interface: `read_corpus(data_cfg) -> {"train", "valid", "test"}` of (src, tgt) pairs.

Sources:
- `tatoeba`: the shipped manythings.org export (English<TAB>French<TAB>attribution), split by a
  seeded shuffle of source-sentence groups (the file is sorted by length, so never split by
  position; a French sentence with several translations never straddles train and test);
- `iwslt2017`: IWSLT 2017 fr-en from the Hugging Face hub, or a local parquet copy (data/iwslt.py);
- `parallel_text`: local line-aligned files, TSV, or the raw WIT3 release (data/parallel_text.py).
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from data.overlap import drop_overlapping_sources, overlap_key
from data.parallel_text import CorpusError, read_split, read_text, split_lines
from utils.files import file_sha256

# French typography puts (narrow) no-break spaces before ; : ! ? and inside guillemets.
_SPACE_TRANSLATION = str.maketrans({"\u00a0": " ", "\u202f": " ", "\u2007": " ", "\u2009": " "})

Pairs = list[tuple[str, str]]


def normalize_text(text: str) -> str:
    """Replace no-break and thin spaces by plain spaces, collapse whitespace runs, strip."""
    return " ".join(text.translate(_SPACE_TRANSLATION).split()) if text else ""


def normalize_pairs(pairs: Pairs) -> Pairs:
    """`normalize_text` on both sides of every pair."""
    return [(normalize_text(src), normalize_text(tgt)) for src, tgt in pairs]


def read_tatoeba(
    path: str | Path, src_lang: str, tgt_lang: str, valid_size: int, test_size: int, seed: int
) -> dict[str, Pairs]:
    """The manythings.org Tatoeba export: English first, then the other language.

    Exact duplicate pairs (after `normalize_text`) are kept once. Pairs are grouped by the
    `overlap_key` of their *source* side and whole groups are dealt out in a seeded shuffle, so
    no source sentence (up to case, punctuation, spacing) is in two splits. See `split_groups`."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(
            f"Tatoeba corpus not found: {path}. It ships in data/corpora/tatoeba-fr-en/; "
            f"run from the repository root or set data.path."
        )
    columns = {"en": 0, "fr": 1}
    if src_lang not in columns or tgt_lang not in columns or src_lang == tgt_lang:
        raise CorpusError(f"the Tatoeba file holds en and fr; got src_lang={src_lang!r}, tgt_lang={tgt_lang!r}")
    pairs: Pairs = []
    seen: set[tuple[str, str]] = set()
    for line_no, line in enumerate(split_lines(read_text(path)), 1):  # errors name the file and line
        fields = line.rstrip("\r").split("\t")
        if len(fields) < 2:
            raise CorpusError(f"{path}:{line_no}: expected English<TAB>French, found {len(fields)} field(s)")
        pair = (fields[columns[src_lang]], fields[columns[tgt_lang]])
        normalized = (normalize_text(pair[0]), normalize_text(pair[1]))
        if normalized not in seen:  # the first copy of a duplicated pair is kept, as read
            seen.add(normalized)
            pairs.append(pair)
    if valid_size + test_size >= len(pairs):
        raise CorpusError(
            f"{path} has {len(pairs)} distinct pairs: too few for valid_size={valid_size} + test_size={test_size}"
        )
    return split_groups(pairs, valid_size, test_size, seed)


def split_groups(pairs: Pairs, valid_size: int, test_size: int, seed: int) -> dict[str, Pairs]:
    """Deal groups of pairs with the same source `overlap_key` to test, valid and train.

    The groups (in order of first appearance) are shuffled with `random.Random(seed)`; each one,
    in that order, goes whole to test if it fits in what test still lacks of `test_size`, else to
    valid if it fits there, else to train. So test and valid never exceed their sizes, and reach
    them exactly unless the groups left cannot fill the last slots (Tatoeba has enough
    one-translation sentences that they always do). Skipping a group that would overflow biases
    the held-out splits against many-translation sources only in their last few slots."""
    groups: dict[str, Pairs] = {}
    for pair in pairs:
        groups.setdefault(overlap_key(pair[0]), []).append(pair)
    order = list(groups.values())
    random.Random(seed).shuffle(order)
    test: Pairs = []
    valid: Pairs = []
    train: Pairs = []
    for group in order:
        if len(test) + len(group) <= test_size:
            test.extend(group)
        elif len(valid) + len(group) <= valid_size:
            valid.extend(group)
        else:
            train.extend(group)
    return {"train": train, "valid": valid, "test": test}


class CorpusSplits(dict):
    """`{"train", "valid", "test"}` pairs, plus what `read_corpus` did to them (for the data report)."""

    dropped_for_overlap: int = 0  # training pairs removed by data.drop_train_overlap


class SplitPairs(list):
    """One split's pairs, with where they were read (`origin`) and what was done to them before
    encoding (`filters`), so that a split the filters leave empty is refused naming both."""

    def __init__(self, pairs: Pairs, origin: str, filters: tuple[str, ...] = ()) -> None:
        super().__init__(pairs)
        self.origin, self.filters = origin, filters


def corpus_origin(cfg, split: str) -> str:
    """Where a split's pairs are read from, in the config's words (for messages)."""
    if cfg.source == "tatoeba":
        return f"data file {cfg.path}"
    if cfg.source == "parallel_text":
        spec = getattr(cfg, split) or {}
        return "data file " + " + ".join(str(spec[k]) for k in ("src", "tgt", "tsv") if k in spec)
    return f"data.hf_name {cfg.hf_name} ({cfg.hf_config}, {split})"


def refuse_empty_splits(splits: dict, cfg) -> None:
    """A split with no pairs cannot train, validate or be scored: one line naming it and its file."""
    for split, pairs in splits.items():
        if pairs:
            continue
        if split == "train" and cfg.drop_train_overlap and splits.dropped_for_overlap:
            raise CorpusError(
                f"0 training pairs left after data.drop_train_overlap removed all "
                f"{splits.dropped_for_overlap:,} ({corpus_origin(cfg, split)}): every training source is also a "
                f"valid or test source; set data.drop_train_overlap: false or train on another file"
            )
        raise CorpusError(
            f"the {split} split has no pairs ({corpus_origin(cfg, split)}): give a file with at least one "
            f"{cfg.src_lang}-{cfg.tgt_lang} pair for it"
        )


def read_corpus(cfg) -> CorpusSplits:
    """Builder: read the configured source, normalise spaces, optionally drop training pairs whose
    source is also a valid/test source (`drop_train_overlap`), cap the training pairs. Each split
    comes as `SplitPairs` (its origin and filters); an empty one is refused."""
    if cfg.source == "tatoeba":
        splits = read_tatoeba(cfg.path, cfg.src_lang, cfg.tgt_lang, cfg.valid_size, cfg.test_size, cfg.split_seed)
    elif cfg.source == "iwslt2017":
        from data.iwslt import read_iwslt2017_hf

        splits = read_iwslt2017_hf(cfg.hf_name, cfg.hf_config, cfg.hf_revision, cfg.src_lang, cfg.tgt_lang)
    elif cfg.source == "parallel_text":
        splits = {
            split: read_split(getattr(cfg, split), cfg.src_lang, cfg.tgt_lang) for split in ("train", "valid", "test")
        }
    else:
        raise CorpusError(f"unknown data.source {cfg.source!r}; valid: tatoeba, iwslt2017, parallel_text")
    splits = CorpusSplits({name: normalize_pairs(pairs) for name, pairs in splits.items()})
    filters: list[str] = []
    if cfg.drop_train_overlap:  # official sets are never re-split: the remedy is to drop from train
        splits["train"], splits.dropped_for_overlap = drop_overlapping_sources(
            splits["train"], (splits["valid"], splits["test"])
        )
        filters.append(f"data.drop_train_overlap removed {splits.dropped_for_overlap:,}")
    if cfg.max_train_pairs is not None and len(splits["train"]) > cfg.max_train_pairs:
        filters.append(f"data.max_train_pairs kept {cfg.max_train_pairs:,} of {len(splits['train']):,}")
        rng = random.Random(cfg.split_seed)
        keep = sorted(rng.sample(range(len(splits["train"])), cfg.max_train_pairs))
        splits["train"] = [splits["train"][i] for i in keep]
    refuse_empty_splits(splits, cfg)
    for name in splits:
        splits[name] = SplitPairs(splits[name], corpus_origin(cfg, name), tuple(filters) if name == "train" else ())
    return splits


@functools.lru_cache(maxsize=64)
def _content_hash(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    """sha256 of a file's bytes, memoised per file state within a process. The state includes
    the inode change time, which every write updates and `touch`/`utime` cannot set back."""
    return file_sha256(Path(path))


def file_id(p: str) -> str:
    """A file's identity for cache keys: its content hash, so an edit that keeps the size and
    the timestamp still invalidates the cache, and a moved checkout still reuses it."""
    path = Path(p)
    if not path.is_file():
        return p
    st = path.stat()
    return "sha256:" + _content_hash(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def corpus_fingerprint(cfg) -> dict:
    """Everything about the corpus source that changes what `read_corpus` returns (for cache keys)."""

    info = {
        k: getattr(cfg, k)
        for k in ("source", "src_lang", "tgt_lang", "max_train_pairs", "split_seed", "drop_train_overlap")
    }
    if cfg.source == "tatoeba":
        info.update(path=file_id(cfg.path), valid_size=cfg.valid_size, test_size=cfg.test_size)
    elif cfg.source == "iwslt2017":
        from data.iwslt import dataset_files

        files = dataset_files(cfg.hf_name, cfg.hf_config, cfg.hf_revision)
        if "local_files" in files:  # hashed, so an edited or replaced parquet file is re-read
            files["local_files"] = {split: [file_id(p) for p in paths] for split, paths in files["local_files"].items()}
        info.update(hf_name=cfg.hf_name, hf_config=cfg.hf_config, hf_revision=cfg.hf_revision, **files)
    else:
        info.update(
            {
                split: {k: file_id(v) if isinstance(v, str) else v for k, v in getattr(cfg, split).items()}
                for split in ("train", "valid", "test")
            }
        )
    return info
