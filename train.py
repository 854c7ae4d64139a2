#!/usr/bin/env python
"""Train an encoder-decoder Transformer from a YAML config (PyTorch-Ignite engine).

Examples:
  python train.py --config configs/demo/sinusoidal.yaml
  python train.py --config configs/iwslt2017/transformer_512dh8_e6d6_epochbased_rope.yaml
  python train.py --config configs/demo/rope.yaml --set training.max_steps=100 --set run_dir=runs/try
  python train.py --run runs/demo/rope --resume        # continue exactly where it stopped

A run folder gets: config.yaml (resolved), tokenizer.json, checkpoints/ (best-k + last,
self-contained), TensorBoard events (tb/), metrics.jsonl (machine-readable log).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Optional

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint, DiskSaver, EarlyStopping, ProgressBar, global_step_from_engine
from torch.utils.data import DataLoader

from data import make_corpus_loader, prepare_splits, tokenizer_cache_path, write_data_report
from data.concat import ConcatPairDataset, plan_train_concat
from data.parallel_text import CorpusError
from data.pipeline import (Collator, EpochBatchSampler, PairDataset, UpdateBatches, padding_fraction,
                           trainable_pairs)
from evaluation.metrics import score_translations
from evaluation.translate import translate
from models import build_model
from tokenizer import PretrainedTokenizer, TokenizerError, load_or_train_tokenizer
from training.checkpoint import CheckpointError, RNGState, RunMeta, read_newest_good_checkpoint, restore_checkpointer
from training.engine import create_evaluator, create_trainer
from training.run_folder import RunFolder, resume_changes
from training.schedules import build_scheduler, set_peak_lr
from utils.cli import add_config_args, main_guard
from utils.config import ConfigError, ExperimentConfig, dump_config, load_config, to_dict
from utils.runtime import JsonlLogger, log, pick_device, rank0_first, seed_everything, skip_cudnn_attention

METRIC_SIGN = {"valid_loss": -1.0, "valid_bleu": 1.0, "valid_accuracy": 1.0}
# Start-up errors that end every rank with the same one-line message (utils.cli.main_guard)
EXPECTED_ERRORS = (ConfigError, CorpusError, CheckpointError, TokenizerError, FileExistsError)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume", action="store_true",
                       help="continue the run in the config's run folder from its last checkpoint")
    group.add_argument("--overwrite", action="store_true", help="delete an existing run folder and start over")
    return parser.parse_args(argv)


def resolve_config(args: argparse.Namespace) -> ExperimentConfig:
    if args.run:
        saved = Path(args.run) / "config.yaml"
        if not saved.is_file():
            raise ConfigError(f"{args.run} is not a run folder (no config.yaml)")
        return load_config(saved, [*args.overrides, f"run_dir={args.run}"])
    cfg = load_config(args.config, args.overrides)
    saved = cfg.resolved_run_dir / "config.yaml"
    if args.resume and saved.is_file():  # continue with the run's own resolved config
        return load_config(saved, [*args.overrides, f"run_dir={cfg.resolved_run_dir}"])
    return cfg


def start_run(args: argparse.Namespace, cfg: ExperimentConfig, corpus, say=log) -> tuple[bool, dict]:
    """Rank 0's start-up: check the run folder, the config changes of a resume, the corpus and a
    pretrained tokenizer; only then create, clear (a start that never saved a checkpoint) or delete
    (--overwrite, the harness's own folder only) the run folder, and write config.yaml and the data
    report. Returns (resume from a checkpoint?, {changed setting: (old, new)})."""
    folder = RunFolder.inspect(cfg.resolved_run_dir)
    action = folder.check(args.resume, args.overwrite)
    resume = folder.state == "trained" and args.resume and not args.overwrite
    changes = {}
    if resume:
        saved = load_config(folder.path / "config.yaml", [f"run_dir={folder.path}"])
        changes = resume_changes(to_dict(saved), to_dict(cfg))
    elif args.resume:
        say(f"{folder.path} holds no checkpoint yet: training starts from step 0")
    splits = corpus()  # a corpus error stops the start here, before anything is deleted
    if cfg.tokenizer.type == "pretrained" and not resume:
        PretrainedTokenizer.from_pretrained(cfg.tokenizer.name)  # loads, or a one-line TokenizerError
    folder.apply(action, say)
    for key, (old, new) in changes.items():
        say(f"resume: {key} {old!r} -> {new!r}")
    dump_config(cfg, folder.path / "config.yaml")
    if not (resume and (folder.path / "data_report.json").is_file()):
        # train/valid/test overlap, measured for every run (a leak inflates every score)
        write_data_report(splits, folder.path / "data_report.json", say)
    return resume, changes


def prepare_data(cfg: ExperimentConfig, corpus, say=log):
    """(tokenizer, encoded train and valid splits): the run's tokenizer (reused, taken from the
    cache, or trained on the training split) and the splits (from the cache, or encoded)."""
    run_dir = cfg.resolved_run_dir
    tokenizer = load_or_train_tokenizer(cfg.tokenizer, lambda: corpus()["train"], run_dir, say,
                                        tokenizer_cache_path(cfg))
    return tokenizer, prepare_splits(cfg.data, tokenizer, ("train", "valid"), corpus, say)


def build_loaders(cfg: ExperimentConfig, splits: dict, tokenizer, world: int = 1, rank: int = 0,
                  say=log) -> tuple[UpdateBatches, DataLoader, EpochBatchSampler]:
    """(training batches grouped per optimizer update, validation batches, the training sampler)."""
    t = cfg.training
    collate = Collator(tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    train = splits["train"]
    concat = cfg.data.train_concat
    if concat.prob > 0:  # joined pairs (Varis & Bojar 2021), drawn once from the seed
        units = plan_train_concat([len(s) for s in train.src], [len(s) for s in train.tgt], concat.prob,
                                  concat.max_k, cfg.data.max_len, cfg.seed)
        train_set = ConcatPairDataset(train, units)
        src_lens, tgt_lens = train_set.lengths()
        joined = sum(len(u) > 1 for u in units)
        say(f"data: train_concat: {len(train):,} pairs -> {len(units):,} examples ({joined:,} of them joined "
            f"pairs, up to {max(map(len, units))} per example)")
    else:
        train_set = PairDataset(train)
        src_lens, tgt_lens = [len(s) for s in train.src], [len(s) for s in train.tgt]
    sampler = EpochBatchSampler(src_lens, tgt_lens, t.batch_size, t.max_tokens, shuffle=True, seed=cfg.seed,
                                num_replicas=world, rank=rank)
    if t.max_tokens:
        alone = sum(max(a, b) + 1 > t.max_tokens for a, b in zip(src_lens, tgt_lens))
        if alone:
            say(f"warning: {alone:,} training examples are longer than training.max_tokens={t.max_tokens} "
                f"tokens: each of them is a batch of its own (raise training.max_tokens or lower data.max_len)")
    # Its own generator: creating an iterator must not draw from the global RNG (exact resume).
    train_loader = DataLoader(train_set, batch_sampler=sampler, collate_fn=collate,
                              num_workers=t.num_workers, generator=torch.Generator().manual_seed(cfg.seed))
    # The validation loss runs on the pairs a model can be trained on; BLEU uses the whole split.
    valid = trainable_pairs(splits["valid"], cfg.data.max_len)
    if len(valid) < len(splits["valid"]):
        say(f"data: validation loss on {len(valid):,} of {len(splits['valid']):,} valid pairs (the others are "
            f"empty or longer than data.max_len); validation BLEU on all of them")
    valid_sampler = EpochBatchSampler([len(s) for s in valid.src], [len(s) for s in valid.tgt], t.batch_size,
                                      t.max_tokens, shuffle=False)
    valid_loader = DataLoader(PairDataset(valid), batch_sampler=valid_sampler, collate_fn=collate,
                              generator=torch.Generator().manual_seed(cfg.seed))
    return UpdateBatches(train_loader, t.update_freq), valid_loader, sampler


def refuse_non_finite(model: torch.nn.Module, metrics: dict, step: int) -> None:
    """Stop the run (FloatingPointError: exit code 3, earlier checkpoints kept) rather than checkpoint
    non-finite weights or count a non-finite validation score as best."""
    bad_metrics = [f"{k}={v}" for k, v in metrics.items() if not math.isfinite(v)]
    bad_params = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad_metrics or bad_params:
        what = ", ".join(bad_metrics + ([f"non-finite weights in {len(bad_params)} tensors (e.g. {bad_params[0]})"]
                                        if bad_params else []))
        raise FloatingPointError(f"step {step}: {what}; no checkpoint was written for this step")


class Rank0Only:
    """Forward calls to `target` on rank 0; do nothing on the other ranks (logs, TensorBoard)."""

    def __init__(self, target, active: bool) -> None:
        self._target, self._active = target, active

    def __getattr__(self, name: str):
        if self._active:
            return getattr(self._target, name)
        return lambda *args, **kwargs: None


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if args.resume and args.run is None and args.config is None:
        raise ConfigError("--resume needs --run runs/<name> or --config <file.yaml>")
    if args.run and not args.resume:
        args.resume = True  # `--run` names an existing run: continue it
    cfg = resolve_config(args)
    # Under torchrun (WORLD_SIZE > 1): one process per device, nccl on GPUs, gloo on CPUs.
    world = int(os.environ.get("WORLD_SIZE", "1"))
    backend = None
    if world > 1:
        backend = "nccl" if torch.cuda.is_available() and cfg.training.device != "cpu" else "gloo"
    result: list[int] = []
    with idist.Parallel(backend=backend) as parallel:
        parallel.run(train_worker, args, cfg, result)
    return result[0] if result else 0


def train_worker(local_rank: int, args: argparse.Namespace, cfg: ExperimentConfig, result: list[int]) -> None:
    """The training run of one process (rank); rank 0 alone writes logs, TensorBoard and checkpoints."""
    rank, world = idist.get_rank(), idist.get_world_size()
    is_main = rank == 0
    say = log if is_main else (lambda message: None)
    run_dir = cfg.resolved_run_dir
    t = cfg.training
    seed_everything(cfg.seed)
    if t.num_threads:
        torch.set_num_threads(t.num_threads)
    device = idist.device() if world > 1 else pick_device(t.device)
    if device.type == "cuda":
        skip_cudnn_attention()
    say(f"run folder: {run_dir}  device: {device}  positional encoding: {cfg.model.positional.name}"
        + (f"  processes: {world} ({idist.backend()})" if world > 1 else ""))

    corpus = make_corpus_loader(cfg.data)
    # Rank 0 sets up the run folder, trains the tokenizer and fills the data cache; the others wait,
    # then read them (and stop with rank 0's own error if its start-up fails).
    resume, changes = rank0_first(lambda: start_run(args, cfg, corpus, say), EXPECTED_ERRORS, share=True)
    tokenizer, splits = rank0_first(lambda: prepare_data(cfg, corpus, say), EXPECTED_ERRORS) or \
        prepare_data(cfg, corpus, say)
    train_loader, valid_loader, sampler = build_loaders(cfg, splits, tokenizer, world, rank, say)
    pad = tokenizer.pad_id
    say(f"data: {len(sampler):,} batches, {len(train_loader):,} updates per epoch{' per process' if world > 1 else ''}; "
        f"target padding "
        f"{padding_fraction(list(sampler), sampler.tgt_lens):.1%}")

    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, pad).to(device)
    num_params = model.num_parameters()
    say(f"model: {num_params:,} parameters")
    opt_cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    optimizer = opt_cls(model.parameters(), lr=t.lr, betas=t.betas, eps=t.eps, weight_decay=t.weight_decay)
    scheduler = build_scheduler(optimizer, t.schedule, len(train_loader))

    scaler = torch.amp.GradScaler(device.type) if t.precision == "fp16" else None
    train_model = idist.auto_model(model) if world > 1 else model  # DistributedDataParallel
    if t.compile:
        train_model = torch.compile(train_model)
    trainer = create_trainer(train_model, optimizer, scheduler, pad, device, t.label_smoothing, t.clip_grad_norm,
                             t.precision, scaler, world)
    evaluator = create_evaluator(model, pad, device)
    metrics_log = Rank0Only(JsonlLogger(run_dir / "metrics.jsonl"), is_main)
    meta = RunMeta(to_dict(cfg), tokenizer.state_dict())
    to_save = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "trainer": trainer,
               "rng": RNGState(), "meta": meta}
    if scaler is not None:
        to_save["scaler"] = scaler

    @trainer.on(Events.EPOCH_STARTED)
    def set_epoch(engine: Engine) -> None:
        sampler.set_epoch(engine.state.epoch)

    # ---- logging: console progress, JSON lines, TensorBoard (rank 0)
    from torch.utils.tensorboard import SummaryWriter
    tb = Rank0Only(SummaryWriter(log_dir=str(run_dir / "tb")) if is_main else None, is_main)
    if sys.stderr.isatty() and is_main:  # a live bar on terminals; logs and CI get the periodic lines below
        ProgressBar(persist=False).attach(trainer, output_transform=lambda out: {"loss": out["loss"]})
    window = {"loss": 0.0, "n": 0, "tokens": 0, "padded": 0, "start": time.time()}
    recent: collections.deque = collections.deque(maxlen=t.log_every)  # (loss, tokens) of the last steps

    @trainer.on(Events.ITERATION_COMPLETED)
    def accumulate(engine: Engine) -> None:
        out = engine.state.output
        window["loss"] += out["loss"] * out["ntokens"]
        window["n"] += out["ntokens"]
        window["tokens"] += out["ntokens"] * world  # every rank trains on a batch of its own
        window["padded"] += out["padded_tgt"] * world
        recent.append((out["loss"], out["ntokens"]))
        if engine.state.iteration % t.log_every == 0:
            elapsed = max(1e-9, time.time() - window["start"])
            loss = window["loss"] / max(1, window["n"])
            record = {"step": engine.state.iteration, "epoch": engine.state.epoch, "loss": loss,
                      "lr": optimizer.param_groups[0]["lr"], "tokens_per_sec": window["tokens"] / elapsed,
                      "tgt_padding": 1.0 - window["tokens"] / max(1, window["padded"])}
            metrics_log.write("train", **record)
            for key in ("loss", "lr", "tokens_per_sec", "tgt_padding"):
                tb.add_scalar(f"train/{key}", record[key], record["step"])
            window.update(loss=0.0, n=0, tokens=0, padded=0, start=time.time())
            if not sys.stderr.isatty():
                say(f"step {record['step']} epoch {record['epoch']}: loss={loss:.3f} lr={record['lr']:.2e} "
                    f"tokens/s={record['tokens_per_sec']:.0f}")

    # ---- validation: loss/ppl/accuracy, and greedy BLEU every `bleu_every` validations.
    # Every rank validates on the whole set (identical results), so checkpoint decisions agree.
    settings = dataclasses.replace(cfg.decoding, strategy="greedy")
    valid = splits["valid"]
    n_bleu = len(valid) if t.bleu_sentences is None else min(t.bleu_sentences, len(valid))
    state = {"validations": 0, "last_step": -1}

    def validate(engine: Engine) -> None:
        step = engine.state.iteration
        if step == state["last_step"]:
            return
        state["last_step"] = step
        evaluator.run(valid_loader)
        m = {k: evaluator.state.metrics[k] for k in ("valid_loss", "valid_ppl", "valid_accuracy")}
        state["validations"] += 1
        if n_bleu and (state["validations"] % t.bleu_every == 0 or engine.should_terminate
                       or t.checkpoint_metric == "valid_bleu"):
            outs = translate(model, tokenizer, valid.raw_src[:n_bleu], settings, device)
            m["valid_bleu"] = score_translations([o.text for o in outs], valid.raw_tgt[:n_bleu]).sacrebleu
            for i, o in enumerate(outs[: t.num_sample_translations]):
                tb.add_text(f"samples/{i}", f"**src:** {o.source}  \n**hyp:** {o.text}  \n"
                                            f"**ref:** {valid.raw_tgt[i]}", step)
        evaluator.state.metrics.update(m)
        metrics_log.write("valid", step=step, epoch=engine.state.epoch, **m)
        refuse_non_finite(model, m, step)  # before any checkpoint of this step is written
        for k, v in m.items():
            tb.add_scalar(f"valid/{k.removeprefix('valid_')}", v, step)
        tb.flush()
        say(f"validation @ step {step} (epoch {engine.state.epoch}): "
            + "  ".join(f"{k}={v:.4f}" for k, v in m.items()))
        best(evaluator)  # after BLEU is known, so any metric can select checkpoints
        if stopper is not None:
            stopper(evaluator)

    every = Events.ITERATION_COMPLETED(every=t.validate_every_steps) if t.validate_every_steps \
        else Events.EPOCH_COMPLETED
    trainer.add_event_handler(every | Events.COMPLETED, validate)

    # ---- checkpoints: best k by the chosen metric, plus the last ones (DiskSaver writes on rank 0 only)
    saver = DiskSaver(run_dir / "checkpoints", require_empty=False, atomic=True)
    sign = METRIC_SIGN[t.checkpoint_metric]

    def score(engine: Engine) -> float:
        value = engine.state.metrics.get(t.checkpoint_metric)
        return sign * value if value is not None else float("-inf")

    step_of = global_step_from_engine(trainer, Events.ITERATION_COMPLETED)
    best = Checkpoint(to_save, saver, filename_prefix="best", score_function=score,
                      score_name=t.checkpoint_metric, n_saved=t.keep_best, global_step_transform=step_of)
    last = Checkpoint(to_save, saver, filename_prefix="last", n_saved=t.keep_last, global_step_transform=step_of)

    def save_last(engine: Engine) -> None:
        refuse_non_finite(model, {}, engine.state.iteration)
        last(engine)

    trainer.add_event_handler(every | Events.COMPLETED, save_last)
    stopper = EarlyStopping(t.early_stopping_patience, score, trainer) if t.early_stopping_patience else None

    # ---- resume
    if resume:
        path, state_dict = read_newest_good_checkpoint(run_dir, say)
        Checkpoint.load_objects({k: v for k, v in to_save.items() if k != "meta"}, state_dict)
        say(f"resumed from {path} at step {trainer.state.iteration} (epoch {trainer.state.epoch})")
        if "training.lr" in changes:
            set_peak_lr(scheduler, t.lr)  # the schedule continues with the new peak
        restore_checkpointer(best, run_dir / "checkpoints", "best")
        restore_checkpointer(last, run_dir / "checkpoints", "last")
        # Mid-epoch: the interrupted epoch's batches continue where they stopped.
        done_updates = trainer.state.iteration % len(train_loader)
        sampler.resume_at(trainer.state.iteration // len(train_loader) + 1, done_updates * t.update_freq)

    target = {"max_iters": t.max_steps} if t.max_steps is not None else {"max_epochs": t.epochs}
    done = (trainer.state.iteration >= t.max_steps) if t.max_steps is not None else (trainer.state.epoch >= t.epochs)
    if resume and done:
        say(f"{run_dir} already finished training ({trainer.state.iteration} steps); raise training.max_steps "
            f"or training.epochs with --set to train longer")
        return

    def stop_cleanly(signum, frame) -> None:
        say(f"received signal {signum}: stopping after this step and saving a checkpoint "
            f"(continue with: python train.py --run {run_dir})")
        trainer.terminate()
        signal.signal(signum, signal.SIG_DFL)  # a second signal stops at once

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop_cleanly)
    metrics_log.write("start", params=num_params, resume=resume, step=trainer.state.iteration, world_size=world,
                      **({"changed": {k: list(v) for k, v in changes.items()}} if changes else {}))
    start = time.time()
    trainer.run(train_loader, **target)
    tb.close()
    elapsed = time.time() - start
    previous = sum(r.get("train_seconds", 0.0) for r in (metrics_log.read("end") or []))
    metrics_log.write("end", step=trainer.state.iteration, epoch=trainer.state.epoch, train_seconds=elapsed,
                      total_train_seconds=previous + elapsed, params=num_params,
                      final_train_loss=sum(l * n for l, n in recent) / max(1, sum(n for _, n in recent)) if recent
                      else None)
    say(f"done: {trainer.state.iteration} steps in {elapsed / 60:.1f} min; checkpoints in {run_dir / 'checkpoints'}")
    result.append(0)


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
