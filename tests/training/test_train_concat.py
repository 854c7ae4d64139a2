"""data.train_concat: training examples made of joined pairs are well-formed, seeded, and resume exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import final_params, losses, tiny_overrides, with_sets
from in_process import run_in_process as run

from data.concat import ConcatPairDataset, plan_train_concat
from data.pipeline import Collator, EncodedSplit, EpochBatchSampler


def _split(n: int = 300, seed: int = 0) -> EncodedSplit:
    import random

    rng = random.Random(seed)
    src = [[rng.randrange(4, 50) for _ in range(rng.randint(1, 12))] for _ in range(n)]
    tgt = [[rng.randrange(4, 50) for _ in range(rng.randint(1, 12))] for _ in range(n)]
    return EncodedSplit(src, tgt, [""] * n, [""] * n)


def test_plan_covers_every_pair_once_within_max_len_and_is_seeded():
    split = _split()
    src_lens, tgt_lens = [len(s) for s in split.src], [len(t) for t in split.tgt]
    units = plan_train_concat(src_lens, tgt_lens, prob=0.5, max_k=4, max_len=30, seed=7)
    assert sorted(i for u in units for i in u) == list(range(300))
    assert all(sum(src_lens[i] for i in u) <= 30 and sum(tgt_lens[i] for i in u) <= 30 for u in units)
    sizes = [len(u) for u in units]
    assert max(sizes) <= 4 and sum(s > 1 for s in sizes) > 30  # about half the draws join 2-4 pairs
    assert plan_train_concat(src_lens, tgt_lens, 0.5, 4, 30, seed=7) == units
    assert plan_train_concat(src_lens, tgt_lens, 0.5, 4, 30, seed=8) != units
    assert all(len(u) == 1 for u in plan_train_concat(src_lens, tgt_lens, 0.0, 4, 30, seed=7))


def test_joined_examples_have_one_bos_and_one_eos():
    split = _split()
    units = plan_train_concat([len(s) for s in split.src], [len(t) for t in split.tgt], 1.0, 3, 40, seed=1)
    data = ConcatPairDataset(split, units)
    unit = next(i for i, u in enumerate(units) if len(u) == 3)
    src, tgt = data[unit]
    assert src == [t for j in units[unit] for t in split.src[j]] and tgt == [
        t for j in units[unit] for t in split.tgt[j]
    ]
    batch = Collator(pad_id=0, bos_id=1, eos_id=2)([data[unit], data[0]])
    for row_in, row_out in zip(batch["tgt_in"].tolist(), batch["tgt_out"].tolist()):
        assert row_in.count(1) == 1 and row_in[0] == 1 and 2 not in row_in
        assert row_out.count(2) == 1 and 1 not in row_out
    assert data.lengths() == ([len(data[i][0]) for i in range(len(data))], [len(data[i][1]) for i in range(len(data))])


def test_joined_ids_equal_the_tokenization_of_joined_text():
    """Training joins token ids; the length study's test inputs join text. With the joint BPE
    (Metaspace pre-tokenizer) the two are the same sequence."""
    from tokenizer import BPETokenizer

    texts = ["Il pleut depuis ce matin.", "Je ne sais pas.", "Où est la gare ?", "C'est l'heure !"]
    tok = BPETokenizer.train(texts * 20, vocab_size=150)
    for a in texts:
        for b in texts:
            assert tok.encode_src(f"{a} {b}") == tok.encode_src(a) + tok.encode_src(b)


def test_sampler_resumes_mid_epoch_on_joined_examples():
    split = _split()
    units = plan_train_concat([len(s) for s in split.src], [len(t) for t in split.tgt], 0.5, 3, 30, seed=3)
    src_lens, tgt_lens = ConcatPairDataset(split, units).lengths()
    full = EpochBatchSampler(src_lens, tgt_lens, max_tokens=60, seed=3)
    full.set_epoch(2)
    batches = list(full)
    resumed = EpochBatchSampler(src_lens, tgt_lens, max_tokens=60, seed=3)
    resumed.resume_at(2, 5)
    resumed.set_epoch(2)
    assert list(resumed) == batches[5:]


def test_training_with_joined_pairs_resumes_exactly(tmp_path: Path):
    def args(run_dir: Path, steps: int) -> list[str]:
        return [
            "train.py",
            "--config",
            "configs/demo/rope.yaml",
            *with_sets(
                tiny_overrides(run_dir, tmp_path / "cache", steps),
                "data.train_concat.prob=0.5",
                "data.train_concat.max_k=3",
                "training.bleu_sentences=0",
            ),
        ]

    full = run(args(tmp_path / "full", 8))
    assert full.returncode == 0, full.stderr[-3000:]
    assert "train_concat" in full.stdout + full.stderr  # the joining is logged
    first = run(args(tmp_path / "split", 4))  # stops mid-epoch, at a multiple of log_every
    assert first.returncode == 0, first.stderr[-3000:]
    resumed = run(["train.py", "--run", str(tmp_path / "split"), "--set", "training.max_steps=8"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = final_params(tmp_path / "full"), final_params(tmp_path / "split")
    for key in a:
        assert (a[key] - b[key]).abs().max().item() < 1e-6, key
    assert losses(tmp_path / "split") == pytest.approx(losses(tmp_path / "full"), rel=1e-6)
