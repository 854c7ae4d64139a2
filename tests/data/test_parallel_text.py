"""Parallel text (data/parallel_text.py): WIT3 XML documents read in source order, plain line-aligned
files without documents."""

from __future__ import annotations

from pathlib import Path

from data.parallel_text import read_line_aligned_documents as read_pairs_with_documents

FIX = Path(__file__).parents[1] / "fixtures"
XML_SRC, XML_REF = FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", FIX / "IWSLT17.TED.dev2010.fr-en.en.xml"


def test_xml_documents_are_read_in_source_order():
    pairs, docs = read_pairs_with_documents(XML_SRC, XML_REF)
    assert docs == ["535", "535", "535", "531", "531"]
    assert pairs[2][0] == "Ce n'est pas nouveau." and all(t for _, t in pairs)
    text_pairs, none = read_pairs_with_documents(FIX / "train.fr", FIX / "train.en")
    assert none is None and len(text_pairs) == 4
