"""IWSLT 2017 from Hugging Face datasets (data/iwslt.py), never over the network in tests: a local
parquet folder, a missing split named, an offline hub and an unreachable one failing fast with the
local-file help."""

from __future__ import annotations

import time

import pytest
from corpus_samples import PLAIN_PAIRS, TAGS_PAIRS, XML_PAIRS
from helpers import write_parquet_dir

from data import iwslt
from data.iwslt import read_iwslt2017_hf
from data.parallel_text import CorpusError  # noqa: E402


def test_hf_reader_local_parquet_dir(tmp_path):
    splits = {"train": PLAIN_PAIRS, "validation": XML_PAIRS, "test": TAGS_PAIRS[:2]}
    write_parquet_dir(
        tmp_path / "iwslt2017", "iwslt2017-fr-en", {k: [(f" {fr} ", en) for fr, en in v] for k, v in splits.items()}
    )
    got = read_iwslt2017_hf(str(tmp_path / "iwslt2017"), cache_dir=str(tmp_path / "cache"))
    assert got == {"train": PLAIN_PAIRS, "valid": XML_PAIRS, "test": TAGS_PAIRS[:2]}
    reverse = read_iwslt2017_hf(
        str(tmp_path / "iwslt2017"), src_lang="en", tgt_lang="fr", cache_dir=str(tmp_path / "cache")
    )
    assert reverse["valid"] == [(en, fr) for fr, en in XML_PAIRS]


def test_hf_reader_local_dir_missing_split(tmp_path):
    write_parquet_dir(tmp_path, "iwslt2017-fr-en", {"train": PLAIN_PAIRS})
    with pytest.raises(CorpusError, match=r"validation.*parquet"):
        read_iwslt2017_hf(str(tmp_path), cache_dir=str(tmp_path / "cache"))


def test_hf_reader_offline_fails_fast_with_local_file_help(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(CorpusError) as err:
        read_iwslt2017_hf()
    assert time.monotonic() - start < 15
    msg = str(err.value)
    assert "unreachable" in msg and "parallel_text" in msg
    assert "train.tags.fr-en.fr" in msg and "IWSLT17.TED.dev2010.fr-en.en.xml" in msg


def test_hf_reader_unreachable_hub_without_offline_env(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(iwslt, "_hub_offline_reason", lambda: "cannot connect to huggingface.co:443 (test)")
    with pytest.raises(CorpusError, match=r"(?s)unreachable.*parallel_text"):
        read_iwslt2017_hf()
