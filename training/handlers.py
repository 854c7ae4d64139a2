"""What train.py attaches to the Ignite trainer: training logs, validation with checkpoints and
early stopping, resume, and clean stops on signals. Each piece takes the `TrainingRun` it acts on.

Only rank 0 writes (logs, TensorBoard, checkpoints: `Rank0Only`, Ignite's DiskSaver); every rank
validates on the whole set, so checkpoint and early-stopping decisions agree across ranks.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint, DiskSaver, EarlyStopping, ProgressBar, global_step_from_engine

from artifacts.checkpoint import CheckpointError, read_newest_good_checkpoint, restore_checkpointer
from decoding.backend import HarnessDecoder
from evaluation.translate import translate
from settings.config import dump_config
from settings.schema import DecodingConfig
from training.schedules import keep_implementation, set_peak_lr
from training.step_stats import StepStats
from training.tensorboard_log import mark_session_start
from utils import run_files
from utils.errors import WriteError
from utils.metrics import HEADLINE, METRIC_SIGN, score_translations
from utils.provenance import end_session, start_session


class Rank0Only:
    """Forward calls to `target` on rank 0; do nothing on the other ranks (logs, TensorBoard)."""

    def __init__(self, target, active: bool) -> None:
        self._target, self._active = target, active

    def __getattr__(self, name: str):
        if self._active:
            return getattr(self._target, name)
        return lambda *args, **kwargs: None


@dataclass
class TrainingRun:
    """The objects of one training process that the handlers act on."""

    cfg: Any
    run_dir: Path
    device: torch.device
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    trainer: Engine
    evaluator: Engine
    to_save: dict  # what a checkpoint holds
    metrics_log: Any  # JsonlLogger (rank 0) or a no-op
    tb: Any  # SummaryWriter (rank 0) or a no-op
    say: Callable[[str], None]
    world: int = 1
    is_main: bool = True  # rank 0: the process that writes logs, TensorBoard and checkpoints
    stats: Optional[StepStats] = None  # what the steps hand to logging, on the device (training/step_stats.py)
    stopped_by: Optional[int] = None  # the signal that stopped training early, if one did


class RotatingDiskSaver(DiskSaver):
    """Ignite's atomic DiskSaver with two changes: a checkpoint that rotates out is deleted only
    after the new one is written (Ignite asks to delete first, so a kill mid-write would leave one
    good checkpoint instead of `keep_last`), and a failed write (a full disk) is one line naming the
    file, its temporary removed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._rotated_out: list[str] = []

    def remove(self, filename: str) -> None:
        self._rotated_out.append(filename)

    def __call__(self, checkpoint, filename: str, metadata=None) -> None:
        try:
            super().__call__(checkpoint, filename, metadata)  # Ignite removes its temporary on failure
        except (OSError, RuntimeError) as e:
            raise WriteError(
                f"cannot write the checkpoint {Path(self.dirname) / filename}: "
                f"{getattr(e, 'strerror', None) or str(e).splitlines()[0]} (disk full?); the "
                f"checkpoints written before are kept"
            ) from None
        for name in self._rotated_out:
            if name != filename:
                super().remove(name)
        self._rotated_out.clear()


def refuse_non_finite(model: torch.nn.Module, metrics: dict, step: int, stats: Optional[StepStats] = None) -> None:
    """Stop the run (FloatingPointError: exit code 3, earlier checkpoints kept) rather than checkpoint
    non-finite weights, count a non-finite validation score as best, or go on after a non-finite
    training loss (the steps since the last log: `stats`)."""
    if stats is not None:
        stats.check_finite(step)
    bad_metrics = [f"{k}={v}" for k, v in metrics.items() if not math.isfinite(v)]
    bad_params = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad_metrics or bad_params:
        what = ", ".join(
            bad_metrics
            + ([f"non-finite weights in {len(bad_params)} tensors (e.g. {bad_params[0]})"] if bad_params else [])
        )
        raise FloatingPointError(f"step {step}: {what}; no checkpoint was written for this step")


def attach_training_log(run: TrainingRun, show_bar: bool) -> None:
    """Every `log_every` steps: mean token loss, LR, throughput, padding and gradient norm (mean over
    the steps, before clipping) to metrics.jsonl,
    TensorBoard and (without a terminal) the console; a live progress bar on terminals."""
    t, trainer = run.cfg.training, run.trainer
    shown = {"loss": float("nan"), "start": time.time()}  # the bar shows the last logged loss: no read per step
    if show_bar:
        ProgressBar(persist=False).attach(trainer, output_transform=lambda out: {"loss": shown["loss"]})

    @trainer.on(Events.ITERATION_COMPLETED(every=t.log_every))
    def log_interval(engine: Engine) -> None:
        got = run.stats.read(engine.state.iteration)  # the one read from the device per interval
        elapsed = max(1e-9, time.time() - shown["start"])
        tokens, padded = got["tokens"] * run.world, got["padded"] * run.world  # every rank trains on its own batch
        loss = shown["loss"] = got["loss"]
        record = {
            "step": engine.state.iteration,
            "epoch": engine.state.epoch,
            "loss": loss,
            "lr": run.optimizer.param_groups[0]["lr"],
            "tokens_per_sec": tokens / elapsed,
            "tgt_padding": 1.0 - tokens / max(1, padded),
            "grad_norm": got["grad_norm"],
        }
        run.metrics_log.write("train", **record)
        for key in ("loss", "lr", "tokens_per_sec", "tgt_padding", "grad_norm"):
            run.tb.add_scalar(f"train/{key}", record[key], record["step"])
        shown["start"] = time.time()
        if not show_bar:
            run.say(
                f"step {record['step']} epoch {record['epoch']}: loss={loss:.3f} lr={record['lr']:.2e} "
                f"tokens/s={record['tokens_per_sec']:.0f}"
            )


def validation_event(t):
    """When validation runs (besides the end): every `validate_every_steps` updates, else every epoch."""
    return (
        Events.ITERATION_COMPLETED(every=t.validate_every_steps) if t.validate_every_steps else Events.EPOCH_COMPLETED
    )


def checkpoint_keepers(run: TrainingRun, score) -> tuple[Checkpoint, Checkpoint]:
    """The best `keep_best` checkpoints by `score` and the last `keep_last`, written atomically."""
    t, trainer = run.cfg.training, run.trainer
    saver = RotatingDiskSaver(run.run_dir / "checkpoints", require_empty=False, atomic=True)
    step_of = global_step_from_engine(trainer, Events.ITERATION_COMPLETED)
    best = Checkpoint(
        run.to_save,
        saver,
        filename_prefix="best",
        score_function=score,
        score_name=t.checkpoint_metric,
        n_saved=t.keep_best,
        global_step_transform=step_of,
    )
    last = Checkpoint(run.to_save, saver, filename_prefix="last", n_saved=t.keep_last, global_step_transform=step_of)
    return best, last


def validation_search(cfg) -> DecodingConfig:
    """Validation BLEU's search: greedy, from the training.bleu_* keys alone (decoding.* is how a
    trained model is decoded at test time, and must not change which checkpoint training keeps).
    Only the batch budget comes from decoding.max_tokens: it batches the search, it finds the same."""
    t = cfg.training
    return DecodingConfig(
        strategy="greedy",
        max_len_a=t.bleu_max_len_a,
        max_len_b=t.bleu_max_len_b,
        precision=t.bleu_precision,
        max_tokens=cfg.decoding.max_tokens,
    )


def validation_bleu(run: TrainingRun, tokenizer, valid_split, n_bleu: int, settings, step: int) -> float:
    """Greedy sacreBLEU on the first `n_bleu` valid pairs; a few samples go to TensorBoard."""
    t = run.cfg.training
    outs = translate(HarnessDecoder(run.model), tokenizer, valid_split.raw_src[:n_bleu], settings, run.device)
    bleu = score_translations([o.text for o in outs], valid_split.raw_tgt[:n_bleu])[HEADLINE]
    for i, o in enumerate(outs[: t.num_sample_translations]):
        run.tb.add_text(
            f"samples/{i}", f"**src:** {o.source}  \n**hyp:** {o.text}  \n**ref:** {valid_split.raw_tgt[i]}", step
        )
    return bleu


def attach_validation(run: TrainingRun, tokenizer, valid_split, valid_loader) -> tuple[Checkpoint, Checkpoint]:
    """Validate every `validate_every_steps` updates (or every epoch) and at the end: loss, perplexity,
    accuracy, and greedy sacreBLEU every `bleu_every` validations; then keep the best `keep_best`
    checkpoints by `checkpoint_metric` and the last `keep_last`, and apply early stopping.
    Returns the (best, last) checkpoint handlers (a resume tells them what they wrote before)."""
    t, trainer, evaluator, model = run.cfg.training, run.trainer, run.evaluator, run.model
    sign = METRIC_SIGN[t.checkpoint_metric]

    def score(engine: Engine) -> float:
        value = engine.state.metrics.get(t.checkpoint_metric)
        return sign * value if value is not None else float("-inf")

    best, last = checkpoint_keepers(run, score)
    stopper = EarlyStopping(t.early_stopping_patience, score, trainer) if t.early_stopping_patience else None
    settings = validation_search(run.cfg)
    n_bleu = len(valid_split) if t.bleu_sentences is None else min(t.bleu_sentences, len(valid_split))
    state = {"validations": 0, "last_step": -1}

    def validate(engine: Engine) -> None:
        step = engine.state.iteration
        if step == state["last_step"]:
            return
        state["last_step"] = step
        run.stats.check_finite(step)  # a diverged run is not validated (nor checkpointed)
        evaluator.run(valid_loader)
        m = {k: evaluator.state.metrics[k] for k in ("valid_loss", "valid_ppl", "valid_accuracy")}
        state["validations"] += 1
        if n_bleu and (
            state["validations"] % t.bleu_every == 0 or engine.should_terminate or t.checkpoint_metric == "valid_bleu"
        ):
            m["valid_bleu"] = validation_bleu(run, tokenizer, valid_split, n_bleu, settings, step)
        evaluator.state.metrics.update(m)
        run.metrics_log.write("valid", step=step, epoch=engine.state.epoch, **m)
        refuse_non_finite(model, m, step)  # before any checkpoint of this step is written (the loss: above)
        for k, v in m.items():
            run.tb.add_scalar(f"valid/{k.removeprefix('valid_')}", v, step)
        run.tb.flush()
        run.say(
            f"validation @ step {step} (epoch {engine.state.epoch}): " + "  ".join(f"{k}={v:.4f}" for k, v in m.items())
        )
        best(evaluator)  # after BLEU is known, so any metric can select checkpoints
        if stopper is not None:
            stopper(evaluator)

    def save_last(engine: Engine) -> None:
        refuse_non_finite(model, {}, engine.state.iteration, run.stats)
        last(engine)

    every = validation_event(t)
    trainer.add_event_handler(every | Events.COMPLETED, validate)
    trainer.add_event_handler(every | Events.COMPLETED, save_last)
    return best, last


def resume_from_checkpoint(
    run: TrainingRun, best: Checkpoint, last: Checkpoint, sampler, updates_per_epoch: int, changes: dict
) -> None:
    """Load the newest good checkpoint into everything `to_save` holds, apply a changed peak LR,
    hand the checkpoint handlers the files they wrote before, and make the interrupted epoch's
    batches continue where they stopped (so a resumed run equals an uninterrupted one)."""
    path, state_dict = read_newest_good_checkpoint(run.run_dir, run.say)
    try:
        # (checkpoints written before the step statistics were saved start a fresh log interval)
        Checkpoint.load_objects(
            {k: v for k, v in run.to_save.items() if k != "meta" and (k in state_dict or k != "step_stats")}, state_dict
        )
    except (RuntimeError, KeyError, ValueError) as e:
        raise CheckpointError(
            f"{path} does not fit the model built from {run.run_dir}/config.yaml and "
            f"tokenizer.json ({str(e).splitlines()[0][:200]}); was tokenizer.json replaced? "
            f"The checkpoint holds the run's own tokenizer: restore tokenizer.json from a copy "
            f"of the run"
        ) from None
    keep_implementation(run.optimizer)
    step = run.trainer.state.iteration
    run.say(f"resumed from {path} at step {step} (epoch {run.trainer.state.epoch})")
    if "training.lr" in changes:
        set_peak_lr(run.scheduler, run.cfg.training.lr)  # the schedule continues with the new peak
    restore_checkpointer(best, run.run_dir / "checkpoints", "best")
    restore_checkpointer(last, run.run_dir / "checkpoints", "last")
    sampler.resume_at(step // updates_per_epoch + 1, (step % updates_per_epoch) * run.cfg.training.update_freq)


STOP_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGUSR2", None)) if s is not None)


def stop_on_signals(run: TrainingRun) -> None:
    """Ctrl-C / SIGTERM / SIGUSR2 (what SLURM sends before a time limit, with --signal): finish the
    current update, validate and checkpoint, then end with EXIT_INTERRUPTED (the run is resumable,
    not finished; the end record names the signal); a second signal stops at once."""

    def stop_cleanly(signum, frame) -> None:
        run.say(
            f"received signal {signum}: stopping after this step and saving a checkpoint "
            f"(continue with: python train.py --run {run.run_dir})"
        )
        run.stopped_by = signum
        run.trainer.terminate()
        signal.signal(signum, signal.SIG_DFL)

    def stop_if_signalled_before(engine: Engine) -> None:
        if run.stopped_by is not None:  # a signal before run(), which clears the terminate() asked for
            engine.terminate()

    run.trainer.add_event_handler(Events.STARTED, stop_if_signalled_before)
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop_cleanly)


def budget_reached(t, step: int, epoch: int) -> bool:
    """Whether a run at `step` (updates) and `epoch` has trained to the budget of `t` (a training
    config section): training.max_steps when set, else training.epochs."""
    return step >= t.max_steps if t.max_steps is not None else epoch >= t.epochs


def train_until_done(run: TrainingRun, updates, resumed: bool, changes: dict, num_params: int) -> bool:
    """Run the trainer to `max_steps` (or `epochs`) and log the run's start and end records. True
    when training finished (its budget, or early stopping), False when a signal stopped it."""
    t, trainer = run.cfg.training, run.trainer
    target = {"max_iters": t.max_steps} if t.max_steps is not None else {"max_epochs": t.epochs}
    if resumed and budget_reached(t, trainer.state.iteration, trainer.state.epoch):
        run.say(
            f"{run.run_dir} already finished training ({trainer.state.iteration} steps); raise "
            f"training.max_steps or training.epochs with --set to train longer"
        )
        return True
    if run.is_main:  # on a resume, what an interrupted attempt logged after the checkpoint is trained again
        if resumed:  # the settings it trains on from here (a resume may change what continues)
            dump_config(run.cfg, run.run_dir / run_files.CONFIG)
        mark_session_start(run.tb, trainer.state.iteration + 1)
        start_session(run.run_dir, run.device, t.precision, run.world, resumed, trainer.state.iteration)
    run.metrics_log.write(
        "start",
        params=num_params,
        resume=resumed,
        step=trainer.state.iteration,
        world_size=run.world,
        **({"changed": {k: list(v) for k, v in changes.items()}} if changes else {}),
    )
    start = time.time()
    trainer.run(updates, **target)
    run.tb.close()
    elapsed = time.time() - start
    previous = sum(r.get("train_seconds", 0.0) for r in (run.metrics_log.read("end") or []))
    finished = run.stopped_by is None
    run.metrics_log.write(
        "end",
        step=trainer.state.iteration,
        epoch=trainer.state.epoch,
        finished=finished,
        **({"stopped_by_signal": run.stopped_by} if not finished else {}),
        train_seconds=elapsed,
        total_train_seconds=previous + elapsed,
        params=num_params,
        final_train_loss=run.stats.final_loss(),
    )
    if run.is_main:
        end_session(run.run_dir, trainer.state.iteration, finished)
    if not finished:
        run.say(
            f"stopped at step {trainer.state.iteration} (signal {run.stopped_by}); checkpoint saved, not finished: "
            f"continue with python train.py --run {run.run_dir}"
        )
        return False
    run.say(
        f"done: {trainer.state.iteration} steps in {elapsed / 60:.1f} min; checkpoints in {run.run_dir / 'checkpoints'}"
    )
    return True


def show_progress_bar(is_main: bool) -> bool:
    """A live bar on terminals; logs and CI get periodic lines instead."""
    return is_main and sys.stderr.isatty()
