"""Translate lists of sentences: tokenize, batch by token budget (sorted by length), search, detokenize.

Used by inference.py, test.py and validation BLEU, so every path decodes the same way. The
settings are the plain `DecodingConfig` dataclass (`decoding:` section of a config).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from data.pipeline import cut_by_token_budget
from decoding.backend import DecodingBackend
from settings.config import DecodingConfig


@dataclass
class Translation:
    source: str
    hypotheses: list[tuple[str, float]]  # (text, length-normalised score), best first
    source_length: int = 0  # subword tokens of the source as given (before any truncation)
    truncated_from: Optional[int] = None  # the source's length in tokens, when it was cut to the model's limit

    @property
    def text(self) -> str:
        return self.hypotheses[0][0] if self.hypotheses else ""


def make_batches(lengths: list[int], max_tokens: int, beam: int) -> list[list[int]]:
    """Indices sorted by length, cut so that batch * longest * beam <= max_tokens (at least one each)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return cut_by_token_budget(order, [max(n, 1) * beam for n in lengths], max_tokens)


@torch.no_grad()
def translate(
    decoder: DecodingBackend,
    tokenizer,
    sentences: list[str],
    settings: DecodingConfig,
    device: torch.device | str = "cpu",
    progress: Optional[Callable] = None,
) -> list[Translation]:
    """Translate `sentences` in input order with `decoder` (a `DecodingBackend`: the harness's search,
    `HarnessDecoder(model)`, or CTranslate2): one translation per sentence, always. Empty input
    gives an empty translation; a source longer than the model can represent (a learnable
    encoding's table) is truncated to that limit and marked (`truncated_from`), never dropped."""
    from data.readers import normalize_text

    limit = decoder.max_positions
    ids = tokenizer.encode_src_batch([normalize_text(s) for s in sentences])
    results: list[Optional[Translation]] = [None] * len(sentences)
    truncated_from: dict[int, int] = {}
    todo = []
    for i, (sentence, src) in enumerate(zip(sentences, ids)):
        if not src:
            results[i] = Translation(sentence, [("", 0.0)], 0)
            continue
        if limit is not None and len(src) > limit:
            truncated_from[i] = len(src)
            ids[i] = src[:limit]
        todo.append(i)
    batches = make_batches(
        [len(ids[i]) for i in todo], settings.max_tokens, 1 if settings.strategy == "greedy" else settings.beam_size
    )
    iterator = progress(batches) if progress is not None else batches
    for batch in iterator:
        rows = [todo[j] for j in batch]
        found = decoder.search([ids[i] for i in rows], tokenizer, settings, device)
        for i, hyps in zip(rows, found):
            results[i] = Translation(
                sentences[i],
                [(tokenizer.decode(h.tokens), h.normalized_score) for h in hyps],
                truncated_from.get(i, len(ids[i])),
                truncated_from.get(i),
            )
    return results  # type: ignore[return-value]
