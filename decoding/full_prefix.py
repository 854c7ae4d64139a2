"""Decoding without a key/value cache, for benchmarks and equivalence tests: every step re-runs the
model's plain `decode()` on the whole prefix (what the original report did). A `Searchable`
(decoding/search.py) like `decoding.step.CachedDecoder`, so the same searches run on it."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


class FullPrefixDecoder:
    """Decoding without a key/value cache: every step re-runs the model's plain `decode()` on the
    whole prefix (what the original report did), the encoder rows repeated for the beams of a
    sentence. A `Searchable` like `CachedDecoder`, so the same searches run on it; its "cache" only
    remembers the prefix tokens. For benchmarks and equivalence tests."""

    def __init__(self, model) -> None:
        self.model = model

    def encode(self, src: Tensor):
        return self.model.encode(src)

    def new_cache(self, capacity: Optional[int] = None) -> dict:
        return {}

    @staticmethod
    def reorder_cache(
        cache: dict, index: Tensor, memory_index: Optional[Tensor] = None, groups: Optional[int] = None
    ) -> None:
        if "tokens" in cache:
            cache["tokens"] = cache["tokens"].index_select(0, index)

    @classmethod
    def reorder_beams(cls, cache: dict, parents: Tensor) -> None:
        sentences, beams = parents.shape
        rows = torch.arange(sentences, device=parents.device)[:, None] * beams + parents  # [sentences, beams]
        cls.reorder_cache(cache, rows.view(-1))

    def decode_step(self, tokens: Tensor, enc, cache: dict, offset: int) -> Tensor:
        prefix = tokens if "tokens" not in cache else torch.cat([cache["tokens"], tokens], dim=1)  # [rows, offset + 1]
        cache["tokens"] = prefix
        sentences = enc.src_mask.size(0)
        if sentences != prefix.size(0):  # the beams of a sentence share its encoder row: one copy per beam
            beams = prefix.size(0) // sentences
            enc = enc.index_select(torch.arange(sentences, device=prefix.device).repeat_interleave(beams))
        return self.model.decode(prefix, enc)[:, -1]  # [rows, vocab]
