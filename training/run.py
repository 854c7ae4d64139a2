"""One training run from a loaded config, on one process or several (torchrun): rank 0 checks and
prepares the run folder, the data and the tokenizer; every rank builds the model, the optimizer and
the Ignite engines, then trains until the budget, early stopping or a signal (`train_run`).
`commands/train.py` (train.py) and a sweep's jobs call `train_run`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Optional

import ignite.distributed as idist
import torch
from ignite.engine import Events
from torch.utils.data import DataLoader

from artifacts.checkpoint import RNGState, RunMeta, read_newest_good_checkpoint, saved_config
from data import make_corpus_loader, prepare_splits, tokenizer_cache_path, write_data_report
from data.concat import ConcatPairDataset, plan_train_concat
from data.packing import PackingCollator
from data.pipeline import Collator, EpochBatchSampler, PairDataset, UpdateBatches, trainable_pairs
from models.build import build_model
from settings.config import ConfigError, ExperimentConfig, dump_config, is_written_config, load_config, to_dict
from settings.key_roles import resume_changes
from tokenizer import PretrainedTokenizer, load_or_train_tokenizer
from training.engine import TokenLoss, compile_for_training, create_evaluator, create_trainer
from training.handlers import (
    STOP_SIGNALS,
    Rank0Only,
    TrainingRun,
    attach_training_log,
    attach_validation,
    resume_from_checkpoint,
    show_progress_bar,
    stop_on_signals,
    train_until_done,
    validation_event,
)
from training.schedules import build_optimizer, build_scheduler
from training.step_stats import StepStats
from training.tensorboard_log import attach_tensorboard_review
from utils import run_files
from utils.errors import EXIT_INTERRUPTED, HarnessError
from utils.files import atomic_write_text, remove_stale_temporaries
from utils.run_folder import LOCK_FILES, RunFolder, RunLock
from utils.run_log import JsonlLogger, log
from utils.runtime import pick_device, rank0_first, seed_everything, skip_cudnn_attention

# Start-up errors that end every rank with the same one-line message (commands.cli.main_guard)
EXPECTED_ERRORS = (HarnessError, FileExistsError)
HELD_LOCKS: list[RunLock] = []  # rank 0's lock on the run folder, held while it trains


def start_run(cfg: ExperimentConfig, corpus, resume: bool, overwrite: bool, say=log) -> tuple[bool, dict]:
    """Rank 0's start-up: check the run folder, the config changes of a resume, the corpus and a
    pretrained tokenizer; only then create, clear (a start that never saved a checkpoint) or delete
    (--overwrite, the harness's own folder only) the run folder, and write config.yaml and the data
    report. Returns (resume from a checkpoint?, {changed setting: (old, new)})."""
    RunFolder.inspect(cfg.resolved_run_dir, is_written_config).check(resume, overwrite)  # refuse before locking
    existed = cfg.resolved_run_dir.exists()
    HELD_LOCKS.append(RunLock(cfg.resolved_run_dir, "train.py").acquire())  # one writer per run folder
    try:
        return checked_start(cfg, corpus, resume, overwrite, say)
    except BaseException:
        if not existed:  # a refused start leaves no folder behind (only its lock would be in it)
            HELD_LOCKS.pop().release()
            for name in LOCK_FILES:
                (cfg.resolved_run_dir / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                cfg.resolved_run_dir.rmdir()
        raise


def checked_start(cfg: ExperimentConfig, corpus, resume_asked: bool, overwrite: bool, say=log) -> tuple[bool, dict]:
    """start_run's work once the run folder is locked."""
    folder = RunFolder.inspect(cfg.resolved_run_dir, is_written_config)  # again, now that no other start can change it
    action = folder.check(resume_asked, overwrite)
    resume = folder.state == "trained" and resume_asked and not overwrite
    changes = {}
    if resume:
        check_metrics_log(folder.path)
        # The experiment is what the checkpoint was trained with, not what config.yaml says now
        changes = resume_changes(checkpoint_config(folder.path, say), to_dict(cfg))
    elif resume_asked:
        say(f"{folder.path} holds no checkpoint yet: training starts from step 0")
    splits = corpus()  # a corpus error stops the start here, before anything is deleted
    if cfg.tokenizer.type == "pretrained" and not resume:  # loads, or a one-line TokenizerError
        check_embedding_sharing(cfg, PretrainedTokenizer.from_pretrained(cfg.tokenizer.name))
    folder.apply(action, say)
    for stale in remove_stale_temporaries(folder.path) + remove_stale_temporaries(folder.path / "checkpoints"):
        say(f"removed {stale}, left by a write that was interrupted")
    for key, (old, new) in changes.items():
        say(f"resume: {key} {old!r} -> {new!r}")
    if not resume:  # a resume records its settings once it trains (train_until_done): a finished run keeps its own
        dump_config(cfg, folder.path / run_files.CONFIG)
    if not (resume and (folder.path / run_files.DATA_REPORT).is_file()):
        # train/valid/test overlap, measured for every run (a leak inflates every score)
        write_data_report(splits, folder.path / run_files.DATA_REPORT, say)
    return resume, changes


def checkpoint_config(run_dir: Path, say=log) -> dict:
    """The resolved config stored in the run's newest good checkpoint (what it was trained with)."""
    _, state = read_newest_good_checkpoint(run_dir, say)
    return to_dict(load_config(raw=saved_config(state), overrides=[f"run_dir={run_dir}"]))


def check_metrics_log(run_dir: Path) -> None:
    """A damaged training log is named before training, not found after hours of it."""
    try:
        JsonlLogger(run_dir / run_files.METRICS).read()
    except ValueError as e:
        raise ConfigError(f"{e}: the run's training log is damaged; repair or delete that line, then resume") from None


def check_embedding_sharing(cfg: ExperimentConfig, tokenizer) -> None:
    if cfg.model.share_embeddings and not tokenizer.shared_vocab:
        raise ConfigError(
            f"model.share_embeddings=true needs one vocabulary for both sides, but "
            f"tokenizer.name={cfg.tokenizer.name} has separate source and target vocabularies: "
            f"set model.share_embeddings=false"
        )


def prepare_data(cfg: ExperimentConfig, corpus, say=log):
    """(tokenizer, encoded train and valid splits): the run's tokenizer (reused, taken from the
    cache, or trained on the training split) and the splits (from the cache, or encoded)."""
    run_dir = cfg.resolved_run_dir
    tokenizer = load_or_train_tokenizer(
        cfg.tokenizer, lambda: corpus()["train"], run_dir, say, tokenizer_cache_path(cfg)
    )
    check_embedding_sharing(cfg, tokenizer)
    return tokenizer, prepare_splits(cfg.data, tokenizer, ("train", "valid"), corpus, say)


def build_loaders(
    cfg: ExperimentConfig, splits: dict, tokenizer, world: int = 1, rank: int = 0, say=log, pin_memory: bool = False
) -> tuple[UpdateBatches, DataLoader, EpochBatchSampler]:
    """(training batches grouped per optimizer update, validation batches, the training sampler).
    With `pin_memory` (a CUDA device) batches come in page-locked memory, so the step's copies to
    the device run asynchronously; `training.num_workers` > 0 prepares the next batches meanwhile."""
    t = cfg.training
    collate = Collator(tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, t.pad_to_multiple)
    train_collate = collate
    if t.pack_length is not None:  # several pairs per row (validation stays one pair per row)
        train_collate = PackingCollator(tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, t.pack_length)
    train_set, src_lens, tgt_lens = training_examples(cfg, splits["train"], say)
    sampler = EpochBatchSampler(
        src_lens,
        tgt_lens,
        t.batch_size,
        t.max_tokens,
        shuffle=True,
        seed=cfg.seed,
        num_replicas=world,
        rank=rank,
        pad_to_multiple=t.pad_to_multiple,
        pack_length=t.pack_length,
    )
    if t.max_tokens and t.pack_length is None:
        alone = sum(size > t.max_tokens for size in sampler.sizes)
        if alone:
            say(
                f"warning: {alone:,} training examples are longer than training.max_tokens={t.max_tokens} "
                f"tokens: each of them is a batch of its own (raise training.max_tokens or lower data.max_len)"
            )
    # Its own generator: creating an iterator must not draw from the global RNG (exact resume).
    train_loader = DataLoader(
        train_set,
        batch_sampler=sampler,
        collate_fn=train_collate,
        pin_memory=pin_memory,
        num_workers=t.num_workers,
        generator=torch.Generator().manual_seed(cfg.seed),
    )
    return UpdateBatches(train_loader, t.update_freq), validation_loader(cfg, splits["valid"], collate, say), sampler


def training_examples(cfg: ExperimentConfig, train, say=log) -> tuple:
    """(the training dataset, its source lengths, its target lengths): the pairs, or with
    data.train_concat some of them joined (Varis & Bojar 2021), drawn once from the seed."""
    concat = cfg.data.train_concat
    if concat.prob <= 0:
        return PairDataset(train), [len(s) for s in train.src], [len(s) for s in train.tgt]
    units = plan_train_concat(
        [len(s) for s in train.src], [len(s) for s in train.tgt], concat.prob, concat.max_k, cfg.data.max_len, cfg.seed
    )
    train_set = ConcatPairDataset(train, units)
    joined = sum(len(u) > 1 for u in units)
    say(
        f"data: train_concat: {len(train):,} pairs -> {len(units):,} examples ({joined:,} of them joined "
        f"pairs, up to {max(map(len, units))} per example)"
    )
    return (train_set, *train_set.lengths())


def validation_loader(cfg: ExperimentConfig, split, collate, say=log) -> DataLoader:
    """The validation loss's batches: the pairs a model can be trained on (BLEU uses the whole split)."""
    t = cfg.training
    valid = trainable_pairs(split, cfg.data.max_len)
    if len(valid) < len(split):
        say(
            f"data: validation loss on {len(valid):,} of {len(split):,} valid pairs (the others are "
            f"empty or longer than data.max_len); validation BLEU on all of them"
        )
    valid_sampler = EpochBatchSampler(
        [len(s) for s in valid.src],
        [len(s) for s in valid.tgt],
        t.batch_size,
        t.max_tokens,
        shuffle=False,
        pad_to_multiple=t.pad_to_multiple,
    )
    return DataLoader(
        PairDataset(valid),
        batch_sampler=valid_sampler,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(cfg.seed),
    )


def record_training_lengths(model, sampler: EpochBatchSampler, run_dir: Optional[Path], say=log) -> None:
    """The longest source and decoder input (target + BOS) of the training data, in positions: in the
    model (each stack's `training_length` buffer, so every checkpoint and export carries it) and in
    the run folder (training_lengths.json). Length diagnostics call what lies past them "beyond
    training"; RoPE's YaRN scaling is relative to them."""
    source, target = max(sampler.src_lens, default=0), max(sampler.tgt_lens, default=-1) + 1
    model.encoder_pe.training_length.fill_(source)
    model.decoder_pe.training_length.fill_(target)
    if run_dir is not None:
        atomic_write_text(
            Path(run_dir) / run_files.TRAINING_LENGTHS,
            json.dumps({"source_positions": source, "target_positions": target}, indent=2) + "\n",
        )
        say(f"data: longest training source {source} positions, longest decoder input {target} (target + BOS)")


def build_training_run(
    cfg: ExperimentConfig, tokenizer, device: torch.device, world: int, updates_per_epoch: int, is_main: bool, say=log
) -> TrainingRun:
    """Model, optimizer, LR schedule, trainer and evaluator engines, and the logs of one process."""
    from torch.utils.tensorboard import SummaryWriter

    t, run_dir, pad = cfg.training, cfg.resolved_run_dir, tokenizer.pad_id
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, pad).to(device)
    say(f"model: {model.num_parameters():,} parameters")
    optimizer = build_optimizer(model, t)
    scheduler = build_scheduler(optimizer, t.schedule, updates_per_epoch)
    scaler = torch.amp.GradScaler(device.type) if t.precision == "fp16" else None
    loss = TokenLoss(model, pad, t.label_smoothing, t.precision)
    if world > 1:
        loss = idist.auto_model(loss)  # DistributedDataParallel
    if t.compile:
        loss = compile_for_training(loss, t.cuda_graphs)
    stats = StepStats(device, t.log_every)
    trainer = create_trainer(
        loss,
        optimizer,
        scheduler,
        stats,
        pad_id=pad,
        device=device,
        clip_grad_norm=t.clip_grad_norm,
        scaler=scaler,
        world_size=world,
        cuda_graphs=t.cuda_graphs,
    )
    to_save = {
        "model": model,
        "optimizer": optimizer,
        "scheduler": scheduler,
        "trainer": trainer,
        "rng": RNGState(),
        "meta": RunMeta(to_dict(cfg), tokenizer.state_dict()),
        "step_stats": stats,  # the unlogged interval: a resumed run logs the same losses
        **({"scaler": scaler} if scaler is not None else {}),
    }
    return TrainingRun(
        cfg=cfg,
        run_dir=run_dir,
        device=device,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        trainer=trainer,
        evaluator=create_evaluator(model, pad, device),
        to_save=to_save,
        metrics_log=Rank0Only(JsonlLogger(run_dir / run_files.METRICS), is_main),
        tb=Rank0Only(SummaryWriter(log_dir=str(run_dir / "tb")) if is_main else None, is_main),
        say=say,
        world=world,
        is_main=is_main,
        stats=stats,
    )


def train_worker(
    local_rank: int, cfg: ExperimentConfig, resume_asked: bool, overwrite: bool, result: list[int]
) -> None:
    """The training run of one process (rank); rank 0 alone writes logs, TensorBoard and checkpoints."""
    rank, world = idist.get_rank(), idist.get_world_size()
    is_main = rank == 0
    say = log if is_main else (lambda message: None)
    t = cfg.training
    seed_everything(cfg.seed)
    if t.num_threads:
        torch.set_num_threads(t.num_threads)
    device = idist.device() if world > 1 else pick_device(t.device)
    if device.type == "cuda":
        skip_cudnn_attention()
    say(
        f"run folder: {cfg.resolved_run_dir}  device: {device}  positional encoding: {cfg.model.positional.name}"
        + (f"  processes: {world} ({idist.backend()})" if world > 1 else "")
    )

    corpus = make_corpus_loader(cfg.data)
    # Rank 0 sets up the run folder, trains the tokenizer and fills the data cache; the others wait,
    # then read them (and stop with rank 0's own error if its start-up fails).
    resume, changes = rank0_first(
        lambda: start_run(cfg, corpus, resume_asked, overwrite, say), EXPECTED_ERRORS, share=True
    )
    tokenizer, splits = rank0_first(lambda: prepare_data(cfg, corpus, say), EXPECTED_ERRORS) or prepare_data(
        cfg, corpus, say
    )
    updates, valid_loader, sampler = build_loaders(
        cfg, splits, tokenizer, world, rank, say, pin_memory=device.type == "cuda"
    )
    say(
        f"data: {len(sampler):,} batches, {len(updates):,} updates per epoch{' per process' if world > 1 else ''}; "
        f"target padding {sampler.target_padding():.1%}"
    )

    run = build_training_run(cfg, tokenizer, device, world, len(updates), is_main, say)
    run.trainer.add_event_handler(Events.EPOCH_STARTED, lambda engine: sampler.set_epoch(engine.state.epoch))
    attach_training_log(run, show_progress_bar(is_main))
    best, last = attach_validation(run, tokenizer, splits["valid"], valid_loader)
    attach_tensorboard_review(run, tokenizer, splits["valid"], validation_event(t), resumed=resume)
    if resume:
        resume_from_checkpoint(run, best, last, sampler, len(updates), changes)
    # after a resume: a checkpoint written before the lengths were recorded loads them as 0
    record_training_lengths(run.model, sampler, cfg.resolved_run_dir if is_main else None, say)
    stop_on_signals(run)
    finished = train_until_done(run, updates, resume, changes, run.model.num_parameters())
    result.append(0 if finished else EXIT_INTERRUPTED)


def train_run(cfg: ExperimentConfig, resume: bool = False, overwrite: bool = False) -> int:
    """Train the run of `cfg` (continue it from its last checkpoint with `resume`; delete the
    harness's own run folder first with `overwrite`): returns 0 when training finished,
    EXIT_INTERRUPTED when a signal stopped it after a checkpoint (resumable, not finished)."""
    # Under torchrun (WORLD_SIZE > 1): one process per device, nccl on GPUs, gloo on CPUs.
    world = int(os.environ.get("WORLD_SIZE", "1"))
    backend = None
    if world > 1:
        backend = "nccl" if torch.cuda.is_available() and cfg.training.device != "cpu" else "gloo"
        if cfg.training.cuda_graphs:  # (checked before the run folder is made)
            raise ConfigError(
                f"training.cuda_graphs is for one process, this is one of {world}: "
                "set training.cuda_graphs: false with several processes"
            )
    result: list[int] = []
    # training stops cleanly on these signals (stop_on_signals); what handled them before does again
    # after it (a sweep job: submitit's requeue on SIGUSR2 while the run is tested)
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        with idist.Parallel(backend=backend) as parallel:
            parallel.run(train_worker, cfg, resume, overwrite, result)
    finally:  # a failed start releases the run folder too (sweep.py and tests call this in-process)
        while HELD_LOCKS:
            HELD_LOCKS.pop().release()
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    return result[0] if result else 0
