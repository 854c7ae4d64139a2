"""Odd translation input never crashes a batch, and the tokenizer round-trips arbitrary text."""

from __future__ import annotations

import pytest
from helpers import tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoding.backend import HarnessDecoder
from evaluation.translate import translate
from models.transformer import Seq2SeqTransformer
from settings.config import DecodingConfig
from tokenizer import BPETokenizer

FR = [
    "Bonjour le monde.",
    "Je t'aime beaucoup.",
    "Où est la gare ?",
    "Il fait beau aujourd'hui !",
    "Hello world.",
    "I love you very much.",
    "Where is the station?",
    "The weather is nice today.",
]


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(FR * 20, vocab_size=120)


@pytest.fixture(scope="module")
def model(tokenizer) -> Seq2SeqTransformer:
    return tiny_model("learnable", vocab=tokenizer.src_vocab_size, layers=1, pad_id=tokenizer.pad_id, max_positions=40)


def test_odd_lines_in_one_batch(tokenizer, model) -> None:
    lines = [
        "",
        "   ",
        "\t\x00\x07 contrôle",
        "😀🇫🇷 emoji",
        "x" * 10_000,
        "Bonjour le monde. " * 30,
        "Où est la gare ?",
    ]
    settings = DecodingConfig(strategy="beam", beam_size=2, max_len_a=1.0, max_len_b=5)
    out = translate(HarnessDecoder(model), tokenizer, lines, settings)
    assert len(out) == len(lines)
    assert out[0].text == "" and out[0].truncated_from is None  # empty -> empty
    assert out[1].text == ""  # whitespace only -> empty after normalisation
    # Longer than the 40-position table: truncated to 40 tokens and translated, never dropped.
    too_long = [i for i, o in enumerate(out) if o.truncated_from is not None]
    assert too_long == [4, 5] and all(out[i].truncated_from > 40 and out[i].hypotheses for i in too_long)
    assert out[-1].truncated_from is None and out[-1].hypotheses  # the normal line is translated as usual


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=0, max_size=60))
def test_tokenizer_round_trip_never_crashes(tokenizer, text: str) -> None:
    ids = tokenizer.encode_src(text)
    assert all(0 <= i < tokenizer.src_vocab_size for i in ids)
    decoded = tokenizer.decode(ids)
    assert isinstance(decoded, str)
    known = set("".join(FR))
    if text and set(text) <= known and text == " ".join(text.split()):
        assert decoded == text  # text made of known characters round-trips exactly


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=30), min_size=1, max_size=4))
def test_translation_of_random_unicode_never_crashes(tokenizer, model, lines: list[str]) -> None:
    out = translate(
        HarnessDecoder(model), tokenizer, lines, DecodingConfig(strategy="greedy", max_len_a=0.5, max_len_b=3)
    )
    assert len(out) == len(lines)
    assert all(isinstance(o.text, str) for o in out)
