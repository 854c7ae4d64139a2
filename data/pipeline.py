"""Encoded splits (cached on disk), length filtering, batch samplers and collation.

The cache key is a hash of everything that changes the encoded tensors: the corpus source and
its files, the split settings, the tokenizer (its full serialisation) and the length limits.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

import torch
from torch import Tensor
from torch.utils.data import Dataset, Sampler

from data.packing import first_fit_batches, packed_padding
from data.parallel_text import CorpusError
from utils.files import atomic_save

CACHE_VERSION = 2  # 2: the Tatoeba split groups pairs by source sentence (data/readers.py)


@dataclass
class EncodedSplit:
    """Token ids (no BOS/EOS) and the original text of one split, after filtering."""

    src: list[list[int]]
    tgt: list[list[int]]
    raw_src: list[str]
    raw_tgt: list[str]
    dropped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.src)


def drop_reason(src_len: int, tgt_len: int, max_len: int, max_src_len: Optional[int] = None) -> Optional[str]:
    """Why a training pair cannot be used (None if it can): empty, too long, or above the source cap."""
    if not src_len or not tgt_len:
        return "empty"
    if src_len > max_len or tgt_len > max_len:
        return "too_long"
    if max_src_len is not None and src_len > max_src_len:
        return "above_train_max_src_len"
    return None


def encode_split(
    pairs: list[tuple[str, str]], tokenizer, max_len: Optional[int], max_src_len: Optional[int] = None
) -> EncodedSplit:
    """Tokenize and drop empty pairs and pairs longer than the limits, counting each reason.
    `max_len=None` keeps every pair (valid and test sets are scored whole)."""
    srcs = tokenizer.encode_src_batch([s for s, _ in pairs])
    tgts = tokenizer.encode_tgt_batch([t for _, t in pairs])
    out = EncodedSplit([], [], [], [], {"empty": 0, "too_long": 0, "above_train_max_src_len": 0})
    for (raw_s, raw_t), s, t in zip(pairs, srcs, tgts):
        reason = None if max_len is None else drop_reason(len(s), len(t), max_len, max_src_len)
        if reason is not None:
            out.dropped[reason] += 1
            continue
        out.src.append(s)
        out.tgt.append(t)
        out.raw_src.append(raw_s)
        out.raw_tgt.append(raw_t)
    if pairs and not out.src and max_len is not None:  # before any loader is built on nothing
        refuse_no_training_pairs(pairs, out.dropped, max_len, max_src_len)
    return out


def refuse_no_training_pairs(pairs, dropped: dict[str, int], max_len: int, max_src_len: Optional[int]) -> None:
    """One line: which filters (with counts) left no training pair, the file, and what to raise."""
    why = {
        "too_long": f"longer than data.max_len={max_len} tokens",
        "above_train_max_src_len": f"sources longer than data.train_max_src_len={max_src_len}",
        "empty": "empty on one side",
    }
    counts = [f"{n:,} {why[k]}" for k, n in dropped.items() if n]
    where = [*(f"before them {f}" for f in getattr(pairs, "filters", ())), getattr(pairs, "origin", "")]
    raise CorpusError(
        f"0 of {len(pairs):,} training pairs left after the length filters: {', '.join(counts)}"
        f"{''.join(f'; {w}' for w in where if w)}. Raise data.max_len"
        f"{' / data.train_max_src_len' if dropped.get('above_train_max_src_len') else ''} or train on longer pairs"
    )


def cache_key(
    corpus_info: dict, split: str, tokenizer_fingerprint: str, max_len: Optional[int], max_src_len: Optional[int]
) -> str:
    payload = json.dumps(
        {
            "v": CACHE_VERSION,
            "corpus": corpus_info,
            "split": split,
            "tok": tokenizer_fingerprint,
            "max_len": max_len,
            "max_src_len": max_src_len,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def load_or_encode(
    pairs_fn: Callable[[], list[tuple[str, str]]],
    cache_dir: Optional[Path],
    key: str,
    tokenizer,
    max_len: Optional[int],
    max_src_len: Optional[int] = None,
) -> tuple[EncodedSplit, bool]:
    """Return the cached split for `key` or encode it (and write the cache atomically)."""
    path = cache_dir / f"{key}.pt" if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            return EncodedSplit(**torch.load(path, weights_only=True)), True
        except Exception:  # a corrupt cache file is simply rebuilt
            path.unlink(missing_ok=True)
    split = encode_split(pairs_fn(), tokenizer, max_len, max_src_len)
    if path is not None:
        atomic_save(split.__dict__, path)
    return split, False


def trainable_pairs(split: EncodedSplit, max_len: int) -> EncodedSplit:
    """The pairs of a whole (valid) split that a loss can be computed on: non-empty, within `max_len`
    (none of them is refused: a validation loss over nothing cannot select a checkpoint)."""
    keep = [i for i, (s, t) in enumerate(zip(split.src, split.tgt)) if drop_reason(len(s), len(t), max_len) is None]
    if split.src and not keep:
        sizes = [max(len(s), len(t)) for s, t in zip(split.src, split.tgt) if s and t]
        fix = f"raise data.max_len to at least {min(sizes)}" if sizes else "give valid pairs with text on both sides"
        raise CorpusError(
            f"0 of the {len(split):,} valid pairs are non-empty and within data.max_len={max_len} tokens "
            f"(the validation loss needs some): {fix}"
        )
    return EncodedSplit(
        [split.src[i] for i in keep],
        [split.tgt[i] for i in keep],
        [split.raw_src[i] for i in keep],
        [split.raw_tgt[i] for i in keep],
    )


class PairDataset(Dataset):
    def __init__(self, split: EncodedSplit) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.split.src[i], self.split.tgt[i]


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def pad_batch(seqs: list[list[int]], pad_id: int, multiple: int = 1) -> Tensor:
    """Right-padded `[len(seqs), longest]` long tensor of token-id lists; with `multiple`, the
    length rounded up to a multiple of it."""
    longest = max(len(s) for s in seqs)
    out = torch.full((len(seqs), round_up(longest, multiple)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def cut_by_token_budget(order: list[int], sizes: list[int], max_tokens: int) -> list[list[int]]:
    """Consecutive runs of `order` such that (items in the run) x (largest size in it) <= max_tokens;
    an item larger than the budget gets a batch of its own. Training batches (size: the longer side
    + 1) and decoding batches (size: source length x beam) are cut by this one rule."""
    batches, current, longest = [], [], 0
    for i in order:
        size = sizes[i]
        if current and (len(current) + 1) * max(longest, size) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    return batches


class Collator:
    """Right-pad sources; build decoder input `<s> y` and output `y </s>`. `pad_to_multiple` rounds
    both lengths up to a multiple of it (training.pad_to_multiple): a run then sees a handful of
    batch shapes instead of hundreds, which compilation and CUDA graphs need."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int, pad_to_multiple: int = 1) -> None:
        self.pad_id, self.bos_id, self.eos_id, self.multiple = pad_id, bos_id, eos_id, pad_to_multiple

    def __call__(self, items: list[tuple[list[int], list[int]]]) -> dict[str, Tensor | int]:
        return {
            "src": pad_batch([s for s, _ in items], self.pad_id, self.multiple),  # [batch, src_len]
            "tgt_in": pad_batch([[self.bos_id, *t] for _, t in items], self.pad_id, self.multiple),
            "tgt_out": pad_batch([[*t, self.eos_id] for _, t in items], self.pad_id, self.multiple),
            # counted here, on the host, so that a training step never reads it back from the device
            "ntokens": sum(len(t) + 1 for _, t in items),
        }


class EpochBatchSampler(Sampler[list[int]]):
    """Deterministic batches: shuffled with `seed + epoch`; call `set_epoch()` before iterating.

    Sentences are grouped by length (fairseq-style), into batches of `batch_size` sentences or
    of up to `max_tokens` (`batch_size * longest side (+1) <= max_tokens`), then the batch order is
    shuffled. `num_replicas`/`rank` give every data-parallel rank its own share of the batches.

    pack_length (training.pack_length): pairs in shuffled order packed into rows of that many
    tokens, `batch_size` rows a batch or `max_tokens // pack_length` (data/packing.py), each batch
    listed row by row for `PackingCollator`; packed once per run, the batch order shuffled per epoch.

    pad_to_multiple > 1 (the collator pads both lengths up to a multiple of it): sentences are
    grouped by their padded (source, decoder) lengths and the budget counts padded tokens, so a
    token-budget batch of a group has the group's one row count, except the group's last batch --
    a handful of batch shapes per run, which compilation and CUDA graphs need.
    """

    def __init__(
        self,
        src_lens: list[int],
        tgt_lens: list[int],
        batch_size: Optional[int] = None,
        max_tokens: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        pad_to_multiple: int = 1,
        pack_length: Optional[int] = None,
    ) -> None:
        if (batch_size is None) == (max_tokens is None):
            raise ValueError("give exactly one of batch_size and max_tokens")
        self.pack_length = pack_length
        self._packed_batches: Optional[list[list[int]]] = None
        self.src_lens, self.tgt_lens = src_lens, tgt_lens
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.multiple = m = pad_to_multiple
        # Each example's size in the token budget: unpadded max(source, target) + 1, or with m > 1
        # the longer of its padded source and decoder input, as Collator pads them
        self._padded = [(round_up(s, m), round_up(t + 1, m)) for s, t in zip(src_lens, tgt_lens)] if m > 1 else None
        self.sizes = (
            [max(p) for p in self._padded] if self._padded else [max(s, t) + 1 for s, t in zip(src_lens, tgt_lens)]
        )
        self.shuffle, self.seed = shuffle, seed
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        self.start_batch = 0
        self._pending: Optional[tuple[int, int]] = None
        self._length = len(self._batches())

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's permutation (a pending `resume_at` for this epoch also skips batches)."""
        self.epoch = epoch
        self.start_batch = 0
        if self._pending is not None and self._pending[0] == epoch:
            self.start_batch = self._pending[1]
            self._pending = None

    def resume_at(self, epoch: int, start_batch: int) -> None:
        """When `epoch` starts, skip its first `start_batch` batches (already trained on before a resume)."""
        self._pending = (epoch, start_batch)

    def _batches(self) -> list[list[int]]:
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        n = len(self.src_lens)
        order = list(range(n))
        if self.shuffle:
            rng.shuffle(order)  # random tie-breaking among equal lengths
        if self.pack_length is not None:  # rows of one length: any pairs may share a batch
            return self._shard([list(b) for b in self._packed()], rng)
        # Sentences of similar length share a batch (fairseq, OpenNMT): little compute on padding
        if self._padded:  # grouped by padded shape: (longer side, decoder input, source)
            order.sort(
                key=lambda i: (
                    self.sizes[i],
                    self._padded[i][1],
                    self._padded[i][0],
                    self.tgt_lens[i],
                    self.src_lens[i],
                )
            )
        else:
            order.sort(key=lambda i: (self.tgt_lens[i], self.src_lens[i]))
        if self.max_tokens is None:
            batches = [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        else:
            batches = cut_by_token_budget(order, self.sizes, self.max_tokens)
        return self._shard(batches, rng)

    def _packed(self) -> list[list[int]]:
        """The packed batches, made once per run from the seed: re-packed every epoch, their number
        would change with the shuffle, and the trainer's epoch length and a resume count batches."""
        if self._packed_batches is None:
            order = list(range(len(self.src_lens)))
            if self.shuffle:
                random.Random(self.seed * 1_000_003 - 1).shuffle(order)
            rows = self.batch_size or max(1, self.max_tokens // self.pack_length)
            dec_lens = [t + 1 for t in self.tgt_lens]
            self._packed_batches = first_fit_batches(order, self.src_lens, dec_lens, self.pack_length, rows)
        return self._packed_batches

    def _shard(self, batches: list[list[int]], rng: random.Random) -> list[list[int]]:
        """The batches in shuffled order, this rank's share of them."""
        if self.shuffle:
            rng.shuffle(batches)
        if self.num_replicas > 1:
            usable = len(batches) - len(batches) % self.num_replicas
            batches = batches[self.rank : usable : self.num_replicas]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._batches()[self.start_batch :])

    def target_padding(self) -> float:
        """Fraction of padded decoder positions in this epoch's batches (packed rows, or one pair per row)."""
        batches = self._batches()
        if self.pack_length is None:
            return padding_fraction(batches, self.tgt_lens)
        return packed_padding(batches, self.src_lens, [t + 1 for t in self.tgt_lens], self.pack_length)

    def __len__(self) -> int:
        return self._length


class UpdateBatches:
    """The batches of a loader in groups of `update_freq` consecutive ones: one group per optimizer
    update (the last group of an epoch may be shorter), so that the trainer's step, `max_steps`,
    validation and checkpoints all count updates, and every checkpoint falls between updates."""

    def __init__(self, loader, update_freq: int) -> None:
        self.loader, self.update_freq = loader, update_freq

    def __len__(self) -> int:
        return -(-len(self.loader) // self.update_freq)

    def __iter__(self) -> Iterator[list]:
        group: list = []
        for batch in self.loader:
            group.append(batch)
            if len(group) == self.update_freq:
                yield group
                group = []
        if group:
            yield group


def padding_fraction(batches: list[list[int]], lens: list[int]) -> float:
    """Fraction of padded positions on one side over a list of batches (+1 for BOS/EOS)."""
    total = real = 0
    for b in batches:
        longest = max(lens[i] for i in b) + 1
        total += longest * len(b)
        real += sum(lens[i] + 1 for i in b)
    return 1.0 - real / total if total else 0.0
