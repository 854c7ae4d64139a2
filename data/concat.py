"""Joining consecutive sentence pairs: long test inputs for the length study, and the
training-time remedy (Varis & Bojar 2021, "Sequence Length is a Domain").

Test side (`concat_groups`, `join_pairs`): k consecutive pairs become one input, source with
source and reference with reference, one space between. Consecutive means consecutive segments
of one document where the reader knows documents (WIT3 XML), else consecutive in a seeded
order (k = 1 keeps the test order: its inputs are the test set). Every pair lands in exactly one
group, so each k scores the same text; only the last group of a document (or of the set) may hold
fewer than k pairs.

Training side (`plan_train_concat`, `ConcatPairDataset`): with probability `prob` a training
unit joins 2..max_k random pairs (token ids concatenated, so the collator still adds one
BOS/EOS), as long as both sides stay within `max_len`. The plan is drawn once per run from the
seed: the epoch length is then fixed (Ignite counts batches per epoch) and resuming mid-epoch
replays exactly the same batches; the batch order is reshuffled every epoch as usual.
"""

from __future__ import annotations

import random
from typing import Optional, Sequence

from torch.utils.data import Dataset

Pair = tuple[str, str]


def concat_groups(num_pairs: int, k: int, documents: Optional[Sequence[str]] = None, seed: int = 1) -> list[list[int]]:
    """Indices of the pairs that form each k-input, in order."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if documents is not None:
        if len(documents) != num_pairs:
            raise ValueError(f"{len(documents)} document ids for {num_pairs} pairs")
        runs: list[list[int]] = []  # maximal runs of consecutive pairs of one document
        for i, doc in enumerate(documents):
            if runs and documents[runs[-1][-1]] == doc:
                runs[-1].append(i)
            else:
                runs.append([i])
    else:
        order = list(range(num_pairs))
        if k > 1:  # k = 1 is the test set itself, in its own order (one comparison, one p-value)
            random.Random(seed).shuffle(order)
        runs = [order] if order else []
    return [run[i : i + k] for run in runs for i in range(0, len(run), k)]


def join_pairs(pairs: Sequence[Pair], groups: list[list[int]]) -> list[Pair]:
    """One (source, reference) per group: the members' texts joined by single spaces (empty ones skipped)."""

    def join(texts) -> str:
        return " ".join(t for t in texts if t)

    return [(join(pairs[i][0] for i in g), join(pairs[i][1] for i in g)) for g in groups]


def plan_train_concat(
    src_lens: Sequence[int], tgt_lens: Sequence[int], prob: float, max_k: int, max_len: int, seed: int
) -> list[tuple[int, ...]]:
    """Training units: single pairs, and with probability `prob` a join of k ~ U{2..max_k} random
    pairs (fewer when the next pair would take either side past `max_len`). Deterministic in `seed`."""
    rng = random.Random(seed)
    order = list(range(len(src_lens)))
    rng.shuffle(order)
    units: list[tuple[int, ...]] = []
    i = 0
    while i < len(order):
        want = rng.randint(2, max_k) if max_k >= 2 and rng.random() < prob else 1
        group = [order[i]]
        src, tgt = src_lens[order[i]], tgt_lens[order[i]]
        i += 1
        while (
            len(group) < want
            and i < len(order)
            and src + src_lens[order[i]] <= max_len
            and tgt + tgt_lens[order[i]] <= max_len
        ):
            group.append(order[i])
            src, tgt = src + src_lens[order[i]], tgt + tgt_lens[order[i]]
            i += 1
        units.append(tuple(group))
    return units


class ConcatPairDataset(Dataset):
    """Training units of an encoded split: each item is its pairs' token ids, concatenated."""

    def __init__(self, split, units: list[tuple[int, ...]]) -> None:
        self.split, self.units = split, units

    def __len__(self) -> int:
        return len(self.units)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        unit = self.units[i]
        return ([t for j in unit for t in self.split.src[j]], [t for j in unit for t in self.split.tgt[j]])

    def lengths(self) -> tuple[list[int], list[int]]:
        """Source and target lengths of every unit (for the token-budget batch sampler)."""
        src = [sum(len(self.split.src[j]) for j in unit) for unit in self.units]
        tgt = [sum(len(self.split.tgt[j]) for j in unit) for unit in self.units]
        return src, tgt
