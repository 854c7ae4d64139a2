"""Parallel text (data/parallel_text.py), no network: plain, gzip, train.tags, WIT3 XML and TSV files,
formats detected by content, documents in source order; every malformed file is one line naming
the file and line."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from corpus_samples import PLAIN_PAIRS, TAGS_PAIRS, XML_PAIRS

from data.parallel_text import (  # noqa: E402
    CorpusError,
    read_line_aligned,
    read_lines,
    read_split,
    read_tsv,
    read_wit3_xml,
    read_wit3_xml_pair,
)
from data.parallel_text import read_line_aligned_documents as read_pairs_with_documents

FIX = Path(__file__).parents[1] / "fixtures"


XML_SRC, XML_REF = FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", FIX / "IWSLT17.TED.dev2010.fr-en.en.xml"


def test_xml_documents_are_read_in_source_order():
    pairs, docs = read_pairs_with_documents(XML_SRC, XML_REF)
    assert docs == ["535", "535", "535", "531", "531"]
    assert pairs[2][0] == "Ce n'est pas nouveau." and all(t for _, t in pairs)
    text_pairs, none = read_pairs_with_documents(FIX / "train.fr", FIX / "train.en")
    assert none is None and len(text_pairs) == 4


TSV_FR_EN = [("Va !", "Go."), ("Salut !", "Hi."), ("Je l\u2019ai emporté !", "I won!")]


def test_read_lines_plain_keeps_empty_lines_and_strips():
    assert read_lines(FIX / "train.fr") == [fr for fr, _ in PLAIN_PAIRS]


def test_read_lines_gzip(tmp_path):
    path = tmp_path / "train.fr.gz"
    path.write_bytes(gzip.compress((FIX / "train.fr").read_bytes()))
    assert read_lines(path) == [fr for fr, _ in PLAIN_PAIRS]


def test_read_line_aligned_plain():
    assert read_line_aligned(FIX / "train.fr", FIX / "train.en") == PLAIN_PAIRS


def test_read_line_aligned_train_tags_drops_metadata():
    pairs = read_line_aligned(FIX / "train.tags.fr-en.fr", FIX / "train.tags.fr-en.en")
    assert pairs == TAGS_PAIRS
    assert not any(s.startswith("<") or t.startswith("<") for s, t in pairs)


def test_train_tags_detected_by_content_when_renamed(tmp_path):
    src, tgt = tmp_path / "talks.fr", tmp_path / "talks.en"
    shutil.copy(FIX / "train.tags.fr-en.fr", src)
    shutil.copy(FIX / "train.tags.fr-en.en", tgt)
    assert read_line_aligned(src, tgt) == TAGS_PAIRS


def test_read_wit3_xml_keys_and_entities():
    segs = read_wit3_xml(FIX / "IWSLT17.TED.dev2010.fr-en.en.xml")
    assert list(segs) == [("535", "2"), ("535", "1"), ("535", "3"), ("531", "2"), ("531", "1")]
    assert segs[("535", "2")] == "Data & documents."
    assert segs[("531", "1")] == "Malaria still kills <many> people."


def test_read_wit3_xml_pair_aligns_by_id_despite_order():
    pairs = read_wit3_xml_pair(FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", FIX / "IWSLT17.TED.dev2010.fr-en.en.xml")
    assert pairs == XML_PAIRS


def test_read_line_aligned_delegates_xml_and_xml_detected_by_content(tmp_path):
    assert (
        read_line_aligned(FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", FIX / "IWSLT17.TED.dev2010.fr-en.en.xml")
        == XML_PAIRS
    )
    src, tgt = tmp_path / "dev.fr", tmp_path / "dev.en"
    shutil.copy(FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", src)
    shutil.copy(FIX / "IWSLT17.TED.dev2010.fr-en.en.xml", tgt)
    assert read_line_aligned(src, tgt) == XML_PAIRS


def test_read_tsv_gzip_with_attribution_column():
    assert read_tsv(FIX / "pairs.en-fr.tsv.gz", src_column=1, tgt_column=0) == TSV_FR_EN


def test_read_split_src_tgt_and_tsv(tmp_path, monkeypatch):
    monkeypatch.chdir(FIX)  # relative paths are relative to the working directory
    assert read_split({"src": "train.fr", "tgt": "train.en"}, "fr", "en") == PLAIN_PAIRS
    assert (
        read_split({"src": "IWSLT17.TED.dev2010.fr-en.fr.xml", "tgt": "IWSLT17.TED.dev2010.fr-en.en.xml"}, "fr", "en")
        == XML_PAIRS
    )
    assert read_split({"tsv": "pairs.en-fr.tsv.gz", "src_column": 1, "tgt_column": 0}, "fr", "en") == TSV_FR_EN
    generic = tmp_path / "valid.tsv"
    generic.write_text("Bonjour.\tHello.\n\tEmpty source.\n", encoding="utf-8")
    assert read_split({"tsv": str(generic)}, "fr", "en") == [("Bonjour.", "Hello."), ("", "Empty source.")]


def test_different_line_counts_names_both_files_and_counts(tmp_path):
    src, tgt = tmp_path / "a.fr", tmp_path / "b.en"
    src.write_text("un\ndeux\ntrois\n", encoding="utf-8")
    tgt.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        read_line_aligned(src, tgt)
    msg = str(err.value)
    assert "a.fr" in msg and "b.en" in msg and "3" in msg and "2" in msg


def test_non_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.fr"
    path.write_bytes("première\ndeuxième\n".encode("utf-8") + "ça ne va pas\n".encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin1\.fr:3\b.*UTF-8"):
        read_lines(path)


def test_non_utf8_in_gzip_names_line(tmp_path):
    path = tmp_path / "bad.tsv.gz"
    path.write_bytes(gzip.compress(b"a\tb\nc\td\n\xff\tx\n"))
    with pytest.raises(CorpusError, match=r"bad\.tsv\.gz:3\b"):
        read_tsv(path, 0, 1)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.en"
    path.write_bytes(b"")
    with pytest.raises(CorpusError, match=r"empty\.en.*empty"):
        read_lines(path)


def test_tsv_too_few_fields_names_line(tmp_path):
    path = tmp_path / "short.tsv.gz"
    path.write_bytes(gzip.compress("Go.\tVa !\tattr\nHi. Salut !\n".encode("utf-8")))
    with pytest.raises(CorpusError, match=r"short\.tsv\.gz:2\b"):
        read_tsv(path, 1, 0)


def test_xml_seg_missing_partner_names_file_doc_and_seg(tmp_path):
    en = (FIX / "IWSLT17.TED.dev2010.fr-en.en.xml").read_text(encoding="utf-8")
    tgt = tmp_path / "IWSLT17.TED.dev2010.fr-en.en.xml"
    tgt.write_text(en.replace('<seg id="3"> This is not new. </seg>\n', ""), encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        read_wit3_xml_pair(FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", tgt)
    msg = str(err.value)
    assert str(tgt) in msg and "doc 535" in msg and "seg id 3" in msg


def test_malformed_xml_names_line(tmp_path):
    path = tmp_path / "broken.fr.xml"
    path.write_text(
        '<mteval><srcset>\n<doc docid="1">\n<seg id="1"> a & b </seg>\n</doc></srcset></mteval>\n', encoding="utf-8"
    )
    with pytest.raises(CorpusError, match=r"broken\.fr\.xml:3\b"):
        read_wit3_xml(path)


def test_read_split_missing_file_and_bad_spec(tmp_path):
    with pytest.raises(CorpusError, match=r"nope\.fr.*not found"):
        read_split({"src": str(tmp_path / "nope.fr"), "tgt": str(FIX / "train.en")}, "fr", "en")
    with pytest.raises(CorpusError, match=r"missing\.tsv.*not found"):
        read_split({"tsv": str(tmp_path / "missing.tsv")}, "fr", "en")
    with pytest.raises(CorpusError, match=r"src: path, tgt: path"):
        read_split({"source": "x"}, "fr", "en")


def test_read_split_swapped_languages(tmp_path):
    with pytest.raises(CorpusError, match="swap"):
        read_split({"src": str(FIX / "train.en"), "tgt": str(FIX / "train.fr")}, "fr", "en")
