"""Packed batches (data/packing.py): every pair once, rows that hold their pairs, the collator's rows
the sampler's, little padding, and the batch's tensors."""

from __future__ import annotations

import random

import pytest
import torch

from data.packing import PackingCollator, first_fit_batches, next_fit_rows, packed_padding
from data.pipeline import EpochBatchSampler, padding_fraction
from models.packing import Packing


def lengths(n: int, seed: int, top: int = 30) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    return [rng.randint(1, top) for _ in range(n)], [rng.randint(1, top) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_first_fit_batches_hold_every_pair_once_in_rows_the_collator_recovers(seed):
    src, tgt = lengths(300, seed)
    dec = [t + 1 for t in tgt]
    order = list(range(300))
    random.Random(seed).shuffle(order)
    for length in (40, 128):
        batches = first_fit_batches(order, src, dec, length, rows=6)
        assert sorted(i for b in batches for i in b) == list(range(300))
        for batch in batches:
            rows = next_fit_rows([src[i] for i in batch], [dec[i] for i in batch], length)
            assert 1 <= len(rows) <= 6  # the sampler's rows: next fit never needs more
            for row in rows:
                assert sum(src[batch[n]] for n in row) <= length and sum(dec[batch[n]] for n in row) <= length
    assert packed_padding(batches, src, dec, 128) < 0.15  # rows of four or more pairs leave little room


def test_a_pair_longer_than_a_row_is_refused():
    with pytest.raises(ValueError, match="does not fit a row of 8"):
        first_fit_batches([0, 1], [3, 9], [2, 2], 8, rows=2)


def test_the_collator_lays_pairs_back_to_back_with_their_pair_and_place():
    items = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13]), ([14, 15], [16])]  # rows of 7: pairs 0 + 1, then 2
    batch = PackingCollator(pad_id=0, bos_id=2, eos_id=3, length=7)(items)
    assert batch["src"].tolist() == [[5, 6, 7, 10, 0, 0, 0], [14, 15, 0, 0, 0, 0, 0]]
    assert batch["tgt_in"].tolist() == [[2, 8, 9, 2, 11, 12, 13], [2, 16, 0, 0, 0, 0, 0]]
    assert batch["tgt_out"].tolist() == [[8, 9, 3, 11, 12, 13, 3], [16, 3, 0, 0, 0, 0, 0]]
    p = Packing.on(batch["packing"], "cpu")
    assert p.src_pair.tolist() == [[0, 0, 0, 1, -1, -1, -1], [2, 2, -1, -1, -1, -1, -1]]
    assert p.tgt_offset.tolist() == [[0, 1, 2, 0, 1, 2, 3], [0, 1, 0, 0, 0, 0, 0]]
    assert p.src_lengths.tolist() == [3, 1, 2] and p.tgt_lengths.tolist() == [3, 4, 2]
    assert (p.src_longest, p.tgt_longest, p.pairs) == (3, 4, 3)
    assert batch["ntokens"] == 3 + 4 + 2


def test_the_sampler_packs_rows_of_one_shape_per_epoch_and_rank():
    src, tgt = lengths(400, seed=7)
    packed = EpochBatchSampler(src, tgt, max_tokens=6 * 64, seed=3, pack_length=64)
    packed.set_epoch(1)
    batches = list(packed)
    assert sorted(i for b in batches for i in b) == list(range(400))
    dec = [t + 1 for t in tgt]
    assert max(len(next_fit_rows([src[i] for i in b], [dec[i] for i in b], 64)) for b in batches) == 6
    assert packed.target_padding() < padding_fraction(batches, tgt) / 2  # rows, not one pair each
    again = EpochBatchSampler(src, tgt, max_tokens=6 * 64, seed=3, pack_length=64)
    again.set_epoch(1)
    assert list(again) == batches
    again.set_epoch(2)
    epoch2 = list(again)
    assert epoch2 != batches and sorted(epoch2) == sorted(batches)  # packed once: the order changes
    assert len(again) == len(batches) == len(epoch2)  # every epoch as long as the trainer counts
    shares = [EpochBatchSampler(src, tgt, batch_size=4, seed=3, pack_length=64, num_replicas=2, rank=r) for r in (0, 1)]
    for share in shares:
        share.set_epoch(1)
    assert not {i for b in shares[0] for i in b} & {i for b in shares[1] for i in b}
    assert all(len(next_fit_rows([src[i] for i in b], [dec[i] for i in b], 64)) <= 4 for b in shares[0])


def test_a_packed_batch_carries_its_longest_pairs_read_on_the_host():
    batch = PackingCollator(0, 2, 3, 8)([([5, 6], [7]), ([8], [9, 10])])
    fields = batch["packing"]
    assert (fields["src_longest"], fields["tgt_longest"]) == (2, 3)  # ints: the step reads nothing back
    moved = Packing.on(fields, torch.device("cpu"))
    assert moved.pairs == 2 and torch.equal(moved.tgt_pair, fields["tgt_pair"])
