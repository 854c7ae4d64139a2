"""Translating lists of sentences (evaluation/translate.py): one translation per sentence in input
order whatever the batching, an empty line translated to an empty one without the model, a source
longer than the model's positions cut to them and marked, batches within the token budget."""

from __future__ import annotations

import dataclasses

from evaluation.translate import make_batches, translate
from settings.config import DecodingConfig


class Words:
    """A tokenizer of whitespace words: word n is id n + 4."""

    pad_id, bos_id, eos_id = 0, 1, 2

    def encode_src_batch(self, texts):
        return [[len(w) + 4 for w in t.split()] for t in texts]

    def decode(self, ids):
        return " ".join(str(i) for i in ids)


class Echo:
    """A backend that echoes each source reversed and records the batches it was given."""

    name, unavailable, max_positions = "echo", None, 4

    def __init__(self) -> None:
        self.batches: list[list[list[int]]] = []

    def search(self, sources, tokenizer, settings, device):
        from decoding.hypotheses import Hypothesis

        self.batches.append(sources)
        return [[Hypothesis(list(reversed(s)), -1.0, -float(len(s)))] for s in sources]


def test_one_translation_per_sentence_in_input_order_whatever_the_batches() -> None:
    sentences = ["a bb ccc", "", "dddd", "a a a a a a", "bb"]
    settings = dataclasses.replace(DecodingConfig(), strategy="greedy", max_tokens=6)
    backend = Echo()
    out = translate(backend, Words(), sentences, settings)
    assert [t.source for t in out] == sentences
    assert [t.text for t in out] == ["7 6 5", "", "8", "5 5 5 5", "6"]
    assert out[1].hypotheses == [("", 0.0)] and all(len(b) for b in backend.batches)
    assert sum(len(b) for b in backend.batches) == 4  # the empty line never reaches the model
    assert out[3].truncated_from == 6 and out[3].source_length == 6 and out[0].truncated_from is None
    assert all(len(b) * max(len(s) for s in b) <= 6 for b in backend.batches)


def test_batches_cover_every_sentence_once_sorted_by_length_within_the_budget() -> None:
    lengths = [5, 1, 3, 3, 9, 2]
    batches = make_batches(lengths, max_tokens=12, beam=2)
    order = [i for b in batches for i in b]
    assert sorted(order) == list(range(6)) and [lengths[i] for i in order] == sorted(lengths)
    assert all(len(b) == 1 or len(b) * max(lengths[i] for i in b) * 2 <= 12 for b in batches)
    assert batches[-1] == [4]  # alone: one sentence over the budget still gets its batch
