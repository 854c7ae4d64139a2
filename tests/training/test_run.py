"""A training run's set-up (training/run.py): the refusals before anything trains (separate
vocabularies with shared embeddings, a damaged training log), the training lengths every checkpoint
carries, joined training pairs drawn from the seed, and validation loss on the trainable pairs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import ROOT, tiny_model

from data.pipeline import EncodedSplit, EpochBatchSampler
from settings.config import load_config
from training.run import (
    check_embedding_sharing,
    check_metrics_log,
    record_training_lengths,
    training_examples,
    validation_loader,
)
from utils.errors import ConfigError

DEMO = ROOT / "configs" / "demo" / "sinusoidal.yaml"


def split(lengths: list[tuple[int, int]]) -> EncodedSplit:
    src = [[5] * s for s, _ in lengths]
    tgt = [[6] * t for _, t in lengths]
    return EncodedSplit(src, tgt, ["s"] * len(src), ["t"] * len(tgt))


def test_shared_embeddings_need_one_vocabulary() -> None:
    cfg = load_config(DEMO)
    check_embedding_sharing(cfg, SimpleNamespace(shared_vocab=True))
    with pytest.raises(ConfigError, match="model.share_embeddings=true needs one vocabulary .* set model.share"):
        check_embedding_sharing(cfg, SimpleNamespace(shared_vocab=False))
    check_embedding_sharing(load_config(DEMO, ["model.share_embeddings=false"]), SimpleNamespace(shared_vocab=False))


def test_a_damaged_training_log_is_named_before_training(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"event": "train", "step": 1}\n')
    check_metrics_log(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"event": "train", "step": 1}\n{"event": "tr\n')
    with pytest.raises(ConfigError, match="the run's training log is damaged; repair or delete that line"):
        check_metrics_log(tmp_path)


def test_the_training_lengths_go_into_the_model_and_the_run_folder(tmp_path: Path) -> None:
    model, said = tiny_model(), []
    sampler = EpochBatchSampler([3, 9, 4], [2, 5, 7], batch_size=2)
    record_training_lengths(model, sampler, tmp_path, said.append)
    assert int(model.encoder_pe.training_length) == 9 and int(model.decoder_pe.training_length) == 8  # 7 + BOS
    saved = json.loads((tmp_path / "training_lengths.json").read_text())
    assert saved == {"source_positions": 9, "target_positions": 8} and "longest training source 9" in said[0]


def test_joined_training_pairs_are_drawn_from_the_seed() -> None:
    train = split([(3, 4)] * 40)
    single, src_lens, tgt_lens = training_examples(load_config(DEMO), train)
    assert len(single) == 40 and src_lens == [3] * 40 and tgt_lens == [4] * 40
    joined = ["data.train_concat.prob=0.5", "data.train_concat.max_k=3"]
    said = []
    one = training_examples(load_config(DEMO, joined), train, said.append)
    again = training_examples(load_config(DEMO, joined), train, lambda _: None)
    other_seed = training_examples(load_config(DEMO, [*joined, "seed=7"]), train, lambda _: None)
    assert one[1] == again[1] and one[1] != other_seed[1]
    assert len(one[0]) < 40 and max(one[1]) > 3 and "joined pairs" in said[0]


def test_validation_loss_runs_on_the_trainable_pairs_and_says_so() -> None:
    cfg = load_config(DEMO, ["data.max_len=5", "training.batch_size=2", "training.max_tokens=null"])
    said = []
    loader = validation_loader(cfg, split([(3, 3), (9, 2), (2, 4), (0, 3)]), lambda pairs: pairs, said.append)
    assert sum(len(batch) for batch in loader) == 2  # too long and empty are left out of the loss
    assert "validation loss on 2 of 4 valid pairs" in said[0]


def test_packed_training_runs_through_train_py_and_logs_its_padding(tmp_path: Path) -> None:
    """training.pack_length end to end: the run trains on packed rows (finite losses, the log's
    padding that of rows of 64 tokens) and validates one pair per row as before."""
    from helpers import losses, train

    run_dir = tmp_path / "run"
    proc = train(run_dir, tmp_path / "cache", "data.max_len=40", "training.pack_length=64", "training.max_tokens=256")
    assert proc.returncode == 0, proc.stderr[-2000:]
    packed = losses(run_dir)
    assert sorted(packed) == [2, 4] and all(math.isfinite(v) for v in packed.values())  # logged every 2 steps
    padding = float(re.search(r"target padding ([\d.]+)%", proc.stdout + proc.stderr).group(1))
    assert padding < 30  # rows of 64 tokens hold several tiny-corpus pairs
