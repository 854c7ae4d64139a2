"""Data: corpus readers, encoded-split cache, batching. `prepare_splits` is the builder."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Callable, Optional

from data.overlap import overlap_report, overlap_summary
from data.parallel_text import CorpusError
from data.pipeline import CACHE_VERSION, EncodedSplit, cache_key, load_or_encode
from data.readers import corpus_fingerprint, corpus_origin, read_corpus
from utils.files import atomic_write_text


def make_corpus_loader(data_cfg) -> Callable[[], dict]:
    """A memoised reader: the raw corpus is read at most once, and only if something needs it."""
    return functools.lru_cache(maxsize=1)(lambda: read_corpus(data_cfg))


def tokenizer_cache_path(cfg) -> Optional[Path]:
    """Where a BPE trained on this corpus with these tokenizer settings is shared between runs."""
    if not cfg.data.cache_dir or cfg.tokenizer.type != "bpe":
        return None
    payload = json.dumps(
        {"corpus": corpus_fingerprint(cfg.data), "tokenizer": vars(cfg.tokenizer), "v": CACHE_VERSION},
        sort_keys=True,
        default=str,
    )
    return Path(cfg.data.cache_dir) / f"tokenizer-{hashlib.sha256(payload.encode()).hexdigest()[:20]}.json"


def prepare_splits(
    data_cfg,
    tokenizer,
    splits: tuple[str, ...] = ("train", "valid", "test"),
    corpus: Optional[Callable[[], dict]] = None,
    log: Callable[[str], None] = print,
) -> dict[str, EncodedSplit]:
    """Encode (or load from cache) the requested splits with `tokenizer`, logging dropped pairs."""
    corpus = corpus or make_corpus_loader(data_cfg)
    info = corpus_fingerprint(data_cfg)
    cache_dir = Path(data_cfg.cache_dir) if data_cfg.cache_dir else None
    out = {}
    for split in splits:
        # Training pairs are filtered by length; valid and test are scored whole (max_len=None).
        max_len = data_cfg.max_len if split == "train" else None
        max_src_len = data_cfg.train_max_src_len if split == "train" else None
        key = cache_key(info, split, tokenizer.fingerprint, max_len, max_src_len)
        encoded, hit = load_or_encode(lambda s=split: corpus()[s], cache_dir, key, tokenizer, max_len, max_src_len)
        how = "cached" if hit else "encoded"
        if split == "train":
            dropped = ", ".join(f"{k}={v}" for k, v in encoded.dropped.items() if v) or "none"
            log(f"data: {split}: {len(encoded):,} pairs ({how}; dropped: {dropped})")
        else:
            log(f"data: {split}: {len(encoded):,} pairs ({how}; all kept for scoring)")
            dropped = "none"
        if len(encoded) == 0:  # a backstop: the readers and encode_split name the file and filters first
            raise CorpusError(
                f"the {split} split is empty after filtering (dropped: {dropped}); "
                f"check data.max_len / data.train_max_src_len and the corpus ({corpus_origin(data_cfg, split)})"
                if split == "train"
                else f"the {split} split is empty (valid and test pairs are never filtered): check its pairs "
                f"({corpus_origin(data_cfg, split)})"
            )
        out[split] = encoded
    return out


def write_data_report(corpus_splits: dict, path: str | Path, log: Callable[[str], None] = print) -> dict:
    """Measure train/valid/test overlap of the raw corpus (`read_corpus`'s dict) and write it as
    JSON to `path` (atomically: a run folder never holds half a report), one log line per
    evaluated split. Returns the report."""
    report = overlap_report(corpus_splits)
    dropped = getattr(corpus_splits, "dropped_for_overlap", 0)
    report["train_pairs_dropped_for_overlap"] = dropped  # data.drop_train_overlap: measured after the drop
    if dropped:
        log(f"data: data.drop_train_overlap removed {dropped:,} training pairs whose source is a valid/test source")
    atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for split in ("valid", "test"):
        line = overlap_summary(report, split)
        if line is not None:
            log(line)
    return report
