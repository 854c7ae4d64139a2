"""Token-budget batching, resume and replicas of the training sampler, padding, and collation
(data/pipeline.py)."""

from __future__ import annotations

import random

import pytest
import torch

from data.pipeline import Collator, EpochBatchSampler, padding_fraction

# ----------------------------------------------------------------------------- batching


def random_lengths(n: int = 300, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    src = [rng.randint(1, 40) for _ in range(n)]
    tgt = [max(1, s + rng.randint(-5, 5)) for s in src]
    return src, tgt


def epoch_batches(sampler: EpochBatchSampler, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


@pytest.mark.parametrize("mode", [{"batch_size": 16}, {"max_tokens": 200}])
def test_sampler_is_deterministic_and_reshuffles(mode):
    src, tgt = random_lengths()
    a = EpochBatchSampler(src, tgt, seed=5, **mode)
    b = EpochBatchSampler(src, tgt, seed=5, **mode)
    assert epoch_batches(a, 3) == epoch_batches(b, 3)
    assert epoch_batches(a, 3) != epoch_batches(a, 4)
    assert epoch_batches(a, 3) != epoch_batches(EpochBatchSampler(src, tgt, seed=6, **mode), 3)


@pytest.mark.parametrize("mode", [{"batch_size": 16}, {"max_tokens": 200}])
def test_sampler_yields_every_index_once_per_epoch(mode):
    src, tgt = random_lengths()
    sampler = EpochBatchSampler(src, tgt, seed=5, **mode)
    for epoch in range(1, 4):
        batches = epoch_batches(sampler, epoch)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(src)))
        assert len(batches) == len(sampler)  # the schedule's steps_per_epoch is right every epoch


def test_sampler_batch_size_mode_buckets_by_length():
    """Sentence-count batches are cut from the length-sorted order (fairseq, OpenNMT), then
    shuffled by batch every epoch: far less padding than batches of random sentences."""
    src, tgt = random_lengths(100)
    batches = epoch_batches(EpochBatchSampler(src, tgt, batch_size=16, seed=1), 1)
    assert sorted(len(b) for b in batches) == [4] + [16] * 6
    by_length = sorted(range(100), key=lambda i: (tgt[i], src[i]))
    for b in batches:  # each batch is a run of consecutive lengths
        lengths = sorted((tgt[i], src[i]) for i in b)
        lo, hi = by_length.index(min(b, key=lambda i: (tgt[i], src[i]))), len(b)
        assert lengths == sorted((tgt[i], src[i]) for i in by_length[lo : lo + hi])
    assert batches != epoch_batches(EpochBatchSampler(src, tgt, batch_size=16, seed=1), 2)  # reshuffled
    unshuffled = epoch_batches(EpochBatchSampler(src, tgt, batch_size=16, shuffle=False), 1)
    assert [i for b in unshuffled for i in b] == sorted(range(100), key=lambda i: (tgt[i], src[i]))
    padding = padding_fraction(batches, tgt)
    shuffled = list(range(100))
    random.Random(0).shuffle(shuffled)
    assert padding < padding_fraction([shuffled[i : i + 16] for i in range(0, 100, 16)], tgt) / 2


def test_sampler_respects_max_tokens():
    src, tgt = random_lengths(500)
    src[7], tgt[7] = 300, 280  # one sentence alone is over the budget: it gets a batch of its own
    max_tokens = 200
    batches = epoch_batches(EpochBatchSampler(src, tgt, max_tokens=max_tokens, seed=2), 1)
    for b in batches:
        longest = max(max(src[i], tgt[i]) for i in b)
        assert len(b) * (longest + 1) <= max_tokens or len(b) == 1
    assert [7] in batches
    # Length bucketing: batches are not all tiny.
    assert sum(len(b) for b in batches) / len(batches) > 4


def test_padded_batches_have_few_shapes_and_keep_the_padded_budget():
    """pad_to_multiple (the collator's rounding): the budget counts padded tokens, and the batches
    of one padded (source, decoder) length pair share one row count but for the pair's last batch;
    every sentence once; the epoch resumes exactly. Without it the shapes are many more."""
    src, tgt = random_lengths(2000, seed=4)
    multiple, max_tokens = 8, 400

    def shape(b: list[int], m: int) -> tuple[int, int, int]:
        pad = lambda n: -(-n // m) * m  # noqa: E731
        return len(b), pad(max(src[i] for i in b)), pad(max(tgt[i] for i in b) + 1)

    sampler = EpochBatchSampler(src, tgt, max_tokens=max_tokens, seed=3, pad_to_multiple=multiple)
    batches = epoch_batches(sampler, 1)
    assert sorted(i for b in batches for i in b) == list(range(2000))
    shapes = [shape(b, multiple) for b in batches]
    assert all(rows * max(s, d) <= max_tokens for rows, s, d in shapes)
    rows = {}
    for n, s, d in shapes:
        rows.setdefault((s, d), set()).add(n)
    assert all(len(counts) <= 2 for counts in rows.values()), rows  # one row count, and the group's last batch
    plain = epoch_batches(EpochBatchSampler(src, tgt, max_tokens=max_tokens, seed=3), 1)
    assert len({shape(b, multiple) for b in plain}) > 1.5 * len(set(shapes))
    sampler.resume_at(2, 5)
    assert (
        epoch_batches(sampler, 2)
        == epoch_batches(EpochBatchSampler(src, tgt, max_tokens=max_tokens, seed=3, pad_to_multiple=multiple), 2)[5:]
    )


def test_sampler_constructor_needs_exactly_one_budget():
    src, tgt = random_lengths(10)
    with pytest.raises(ValueError):
        EpochBatchSampler(src, tgt)
    with pytest.raises(ValueError):
        EpochBatchSampler(src, tgt, batch_size=2, max_tokens=100)


@pytest.mark.parametrize("mode", [{"batch_size": 16}, {"max_tokens": 200}])
def test_sampler_resume_skips_trained_batches(mode):
    src, tgt = random_lengths()
    full = epoch_batches(EpochBatchSampler(src, tgt, seed=5, **mode), 3)
    sampler = EpochBatchSampler(src, tgt, seed=5, **mode)
    sampler.resume_at(3, 4)
    assert epoch_batches(sampler, 3) == full[4:]
    # Only that epoch is shortened; the next one is complete again.
    assert len(epoch_batches(sampler, 4)) == len(full)
    # A resume point for a later epoch does not affect the current one.
    sampler.resume_at(6, 2)
    assert epoch_batches(sampler, 5) == epoch_batches(EpochBatchSampler(src, tgt, seed=5, **mode), 5)
    assert epoch_batches(sampler, 6) == epoch_batches(EpochBatchSampler(src, tgt, seed=5, **mode), 6)[2:]


@pytest.mark.parametrize("mode", [{"batch_size": 16}, {"max_tokens": 200}])
def test_sampler_replicas_get_disjoint_shares(mode):
    src, tgt = random_lengths()
    ranks = [EpochBatchSampler(src, tgt, seed=5, num_replicas=2, rank=r, **mode) for r in (0, 1)]
    shares = [epoch_batches(s, 2) for s in ranks]
    idx = [{i for b in share for i in b} for share in shares]
    assert idx[0] and idx[1] and not idx[0] & idx[1]
    assert len(shares[0]) == len(shares[1]) == len(ranks[0])  # same number of steps on every rank
    single = epoch_batches(EpochBatchSampler(src, tgt, seed=5, **mode), 2)
    assert len(single) - 1 <= 2 * len(shares[0]) <= len(single)
    assert all(b in single for share in shares for b in share)


@pytest.mark.slow
def test_shipped_corpus_token_batches_have_little_target_padding(shipped_corpus):
    """The demo's setting on the real length distribution: a joint 8k BPE trained on the training
    split (as train.py does), 1,500-token batches; bucketing keeps target padding under 10%."""
    from tokenizer import BPETokenizer

    train = shipped_corpus["train"]
    tok = BPETokenizer.train((text for pair in train for text in pair), vocab_size=8000)
    src = [len(ids) for ids in tok.encode_src_batch([s for s, _ in train])]
    tgt = [len(ids) for ids in tok.encode_tgt_batch([t for _, t in train])]
    assert sum(tgt) > 1.1 * sum(len(t.split()) for _, t in train)  # subwords, not words
    for seed in (1, 2):
        sampler = EpochBatchSampler(src, tgt, max_tokens=1500, seed=seed)
        batches = epoch_batches(sampler, 1)
        assert sorted(i for b in batches for i in b) == list(range(len(train)))
        assert all(len(b) * (max(max(src[i], tgt[i]) for i in b) + 1) <= 1500 for b in batches if len(b) > 1)
        assert padding_fraction(batches, tgt) <= 0.10


def test_padding_fraction_by_hand():
    lens = [1, 3, 2, 2]
    # batch [0, 1]: longest 3+1=4, 2 rows -> 8 slots, real (1+1)+(3+1)=6; batch [2, 3]: 6 slots, 6 real
    assert padding_fraction([[0, 1], [2, 3]], lens) == pytest.approx(1 - 12 / 14)
    assert padding_fraction([], lens) == 0.0


# ----------------------------------------------------------------------------- collation


def test_collator_shifts_and_pads():
    pad, bos, eos = 0, 2, 3
    items = [([5, 6, 7], [8, 9]), ([5], [10, 11, 12, 13])]
    batch = Collator(pad, bos, eos)(items)
    assert batch["src"].tolist() == [[5, 6, 7], [5, pad, pad]]
    assert batch["tgt_in"].tolist() == [[bos, 8, 9, pad, pad], [bos, 10, 11, 12, 13]]
    assert batch["tgt_out"].tolist() == [[8, 9, eos, pad, pad], [10, 11, 12, 13, eos]]
    assert all(batch[k].dtype == torch.long for k in ("src", "tgt_in", "tgt_out"))
    assert batch["ntokens"] == int(batch["tgt_out"].ne(pad).sum()) == 8  # counted on the host, for the step
    # Teacher forcing: the output is the input shifted left by one, on the real tokens.
    for row, (_, tgt) in enumerate(items):
        n = len(tgt) + 1
        assert batch["tgt_in"][row, 1:n].tolist() == batch["tgt_out"][row, : n - 1].tolist()


def test_pad_to_multiple_rounds_lengths_and_leaves_the_loss_alone():
    """training.pad_to_multiple: batch lengths rounded up (a handful of shapes for compilation),
    the extra positions padding, so the summed loss and the token count are unchanged."""
    from helpers import tiny_model

    from training.engine import sequence_loss

    items = [([5, 6, 7], [8, 9]), ([5], [10, 11, 12, 13]), ([9] * 9, [7] * 10)]
    plain, rounded = Collator(0, 2, 3)(items), Collator(0, 2, 3, pad_to_multiple=8)(items)
    assert rounded["src"].shape == (3, 16) and rounded["tgt_in"].shape == rounded["tgt_out"].shape == (3, 16)
    assert plain["src"].shape == (3, 9) and plain["tgt_out"].shape == (3, 11)
    assert rounded["ntokens"] == plain["ntokens"] and torch.equal(rounded["src"][:, :9], plain["src"])
    model = tiny_model("sinusoidal", seed=4)
    with torch.no_grad():
        losses = [float(sequence_loss(model(b["src"], b["tgt_in"]), b["tgt_out"], 0)) for b in (plain, rounded)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)


def test_pad_to_multiple_is_checked_against_a_learnable_table():
    """A table of max_len + 1 rows fits every batch until the rounding makes it longer: refused
    when the config loads, naming the key, not mid-training."""
    from settings.config import ConfigError, load_config

    def load(multiple: int):
        return load_config(
            raw={
                "data": {"max_len": 128},
                "training": {"pad_to_multiple": multiple},
                "model": {"d_model": 32, "num_heads": 4, "positional": {"name": "learnable", "max_positions": 129}},
            }
        )

    assert load(1).training.pad_to_multiple == 1
    with pytest.raises(ConfigError, match="max_positions"):
        load(8)  # 129 rounds up to 136
