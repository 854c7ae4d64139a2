"""Packed training batches (training.pack_length): several sentence pairs per row, no padding between them.

Token-budget batches of one length group still pad every row to its longest pair, and every batch
has its own shape. Packing fills rows of a fixed length R instead: pairs, in shuffled order, go
into the first row of the batch with room for both their source and their decoder input (first
fit); a batch is `rows` rows, so every batch but the last is `[rows, R]`. The model attends within
each pair only and restarts every pair's positions (models/packing.py reads the fields the
collator writes).

The sampler (data/pipeline.py's EpochBatchSampler) packs once per run and shuffles the batches'
order every epoch, so every epoch has the same number of batches (the trainer's epoch length, an
exact resume). It hands a batch's pairs over row by row; the collator cuts them into the same rows
again by next fit, which gives the sampler's rows exactly: a pair that opened a row fitted none of
the rows open then, and they only fill further.
"""

from __future__ import annotations

import torch


def first_fit_batches(
    order: list[int], src_lens: list[int], dec_lens: list[int], length: int, rows: int
) -> list[list[int]]:
    """Pairs `order` packed into batches of at most `rows` rows of `length` source and `length`
    decoder tokens (first fit within the open batch); each batch listed row by row. dec_lens: the
    decoder input's length of each pair (target + BOS)."""
    batches: list[list[int]] = []
    open_rows: list[tuple[list[int], int, int]] = []  # (pairs, source tokens, decoder tokens)
    for i in order:
        s, t = src_lens[i], dec_lens[i]
        if s > length or t > length:
            raise ValueError(f"pair {i} ({s} source, {t} decoder tokens) does not fit a row of {length}")
        slot = next((n for n, (_, fs, ft) in enumerate(open_rows) if fs + s <= length and ft + t <= length), None)
        if slot is None and len(open_rows) == rows:
            batches.append([j for pairs, _, _ in open_rows for j in pairs])
            open_rows, slot = [], None
        if slot is None:
            open_rows.append(([i], s, t))
        else:
            pairs, fs, ft = open_rows[slot]
            open_rows[slot] = (pairs + [i], fs + s, ft + t)
    if open_rows:
        batches.append([j for pairs, _, _ in open_rows for j in pairs])
    return batches


def next_fit_rows(src_lens: list[int], dec_lens: list[int], length: int) -> list[list[int]]:
    """Items (in order) cut into rows of `length` source and decoder tokens: a new row whenever the
    next item does not fit the current one. Returns item positions per row."""
    rows: list[list[int]] = []
    fs = ft = length + 1  # no row open yet
    for n, (s, t) in enumerate(zip(src_lens, dec_lens)):
        if fs + s > length or ft + t > length:
            rows.append([])
            fs = ft = 0
        rows[-1].append(n)
        fs, ft = fs + s, ft + t
    return rows


def packed_padding(batches: list[list[int]], src_lens: list[int], dec_lens: list[int], length: int) -> float:
    """Fraction of padded decoder positions over packed batches (rows of `length`, as the collator cuts them)."""
    total = real = 0
    for batch in batches:
        rows = next_fit_rows([src_lens[i] for i in batch], [dec_lens[i] for i in batch], length)
        total += len(rows) * length
        real += sum(dec_lens[i] for i in batch)
    return 1.0 - real / total if total else 0.0


class PackingCollator:
    """A packed batch from a batch's pairs, given row by row (`first_fit_batches`): `src`, `tgt_in`,
    `tgt_out` `[rows, length]`, `packing` (the fields of `models.packing.Packing`: which pair each
    token belongs to, its place in the pair, each pair's lengths and the longest, read here on the
    host) and `ntokens`, as `data.pipeline.Collator`'s keys."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int, length: int) -> None:
        self.pad_id, self.bos_id, self.eos_id, self.length = pad_id, bos_id, eos_id, length

    def __call__(self, items: list[tuple[list[int], list[int]]]) -> dict:
        sources = [s for s, _ in items]
        dec_in = [[self.bos_id, *t] for _, t in items]
        dec_out = [[*t, self.eos_id] for _, t in items]
        rows = next_fit_rows([len(s) for s in sources], [len(d) for d in dec_in], self.length)
        shape = (len(rows), self.length)
        src, tgt_in, tgt_out = (torch.full(shape, self.pad_id, dtype=torch.long) for _ in range(3))
        src_pair, tgt_pair = torch.full(shape, -1, dtype=torch.long), torch.full(shape, -1, dtype=torch.long)
        src_offset, tgt_offset = torch.zeros(shape, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
        pair = 0
        for r, members in enumerate(rows):
            at_src = at_tgt = 0
            for n in members:
                s, d = len(sources[n]), len(dec_in[n])
                src[r, at_src : at_src + s] = torch.tensor(sources[n])
                tgt_in[r, at_tgt : at_tgt + d] = torch.tensor(dec_in[n])
                tgt_out[r, at_tgt : at_tgt + d] = torch.tensor(dec_out[n])
                src_pair[r, at_src : at_src + s], tgt_pair[r, at_tgt : at_tgt + d] = pair, pair
                src_offset[r, at_src : at_src + s] = torch.arange(s)
                tgt_offset[r, at_tgt : at_tgt + d] = torch.arange(d)
                at_src, at_tgt, pair = at_src + s, at_tgt + d, pair + 1
        order = [n for members in rows for n in members]  # pair ids follow the rows
        src_lengths = torch.tensor([len(sources[n]) for n in order])
        tgt_lengths = torch.tensor([len(dec_in[n]) for n in order])
        packing = dict(
            src_pair=src_pair,
            src_offset=src_offset,
            tgt_pair=tgt_pair,
            tgt_offset=tgt_offset,
            src_lengths=src_lengths,
            tgt_lengths=tgt_lengths,
            src_longest=int(src_lengths.max()),
            tgt_longest=int(tgt_lengths.max()),
        )
        ntokens = sum(len(d) for d in dec_out)
        return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out, "packing": packing, "ntokens": ntokens}
