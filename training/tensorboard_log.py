"""What TensorBoard shows of a run beyond the training scalars, so that `tensorboard --logdir runs`
reviews a sweep:

- an HParams session per run (the encoding and its options, model size, seed, key training and data
  settings, as the run first started: TensorBoard keeps a run's first session record, so a resume
  does not write another). Its metrics are the run's own scalars, found by the HParams plugin in the same folder:
  validation loss/BLEU/accuracy from training, and test sacreBLEU/chrF/nltk BLEU (per k of the
  length protocol too, under test_concat/) that `test.py` adds (`log_test_scores`), so one table compares the encodings;
- every `training.tensorboard_images_every` validations and at the end: attention maps for a fixed
  validation sentence (encoder self, decoder self, cross) and each learned positional table (a
  learnable encoding's positions, a T5/Shaw bias table) as images; at the end, the TensorBoard
  projector for learnable position tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import torch

from settings.config import flatten, to_dict
from settings.key_roles import hparam_keys
from utils.metrics import HEADLINE, METRICS

if TYPE_CHECKING:
    from ignite.engine import Engine


def run_hparams(cfg) -> dict:
    """The run's HParams: values as TensorBoard takes them (numbers, strings, booleans; None -> 'none')."""
    flat = flatten(to_dict(cfg))
    # the keys the schema marks `hparam`, and every option of the run's encoding
    keys = [k for k in flat if k.startswith("model.positional.")] + hparam_keys()
    return {k: flat[k] if isinstance(flat[k], (bool, int, float, str)) else str(flat[k]).lower() for k in keys}


def write_session(writer, cfg, start: bool) -> None:
    """HParams session start (the settings) or end (status) of this run, in its own event files."""
    from torch.utils.tensorboard.summary import hparams

    _, session_start, session_end = hparams(run_hparams(cfg), {})
    writer.file_writer.add_summary(session_start if start else session_end)
    writer.flush()


def log_model_images(
    writer, model, tokenizer, sentence: str, step: int, figures: bool = True, projector: bool = False
) -> None:
    """Attention maps for `sentence` and the learned positional tables as images at `step`; with
    `projector`, learnable position tables also go to the TensorBoard projector."""
    from evaluation.figures import sentence_attention_figures, table_figure  # (matplotlib: only where drawn)

    if figures:
        was_training = model.training
        model.eval()
        try:
            for kind, fig in sentence_attention_figures(model, tokenizer, sentence).items():
                writer.add_figure(f"attention/{kind}", fig, step)  # (closes the figure)
        finally:
            model.train(was_training)
    for stack, pe in (("encoder", model.encoder_pe), ("decoder", model.decoder_pe)):
        # the learned tables (embeddings), not the weights of an MLP (FIRE) or per-head scalars (KERPLE)
        tables = [(f"{n}.weight", m.weight) for n, m in pe.named_modules() if isinstance(m, torch.nn.Embedding)]
        for name, param in tables:
            positions = name == "table.weight"  # learnable: [positions, d_model]; biases: [distances, heads]
            axes = ("dimension", "position") if positions else ("head", "relative-distance bucket")
            title = f"{pe.registry_name} {stack} {name} {tuple(param.shape)}"
            if figures:
                writer.add_figure(f"positions/{stack}/{name}", table_figure(param, title, *axes), step)
            if positions and projector:
                writer.add_embedding(
                    param.detach().float().cpu(),
                    metadata=[str(i) for i in range(param.size(0))],
                    tag=f"positions_{stack}",
                    global_step=step,
                )
    writer.flush()


def attach_tensorboard_review(run, tokenizer, valid_split, validation_event, resumed: bool) -> None:
    """HParams session of the run (rank 0), and model images every `tensorboard_images_every`
    validations and at the end (0: never)."""
    from ignite.engine import Events  # (here: test.py logs its scores through this module without ignite)

    every = run.cfg.training.tensorboard_images_every
    if not run.is_main:
        return
    if not resumed:
        write_session(run.tb, run.cfg, start=True)
    state = {"validations": 0, "logged": -1}
    sentence = valid_split.raw_src[0] if len(valid_split) else ""

    def on_validation(engine: Engine) -> None:
        state["validations"] += 1
        if every and sentence and state["validations"] % every == 0:
            state["logged"] = engine.state.iteration
            log_model_images(run.tb, run.model, tokenizer, sentence, engine.state.iteration)

    def on_completed(engine: Engine) -> None:
        step = engine.state.iteration
        if every and sentence:
            log_model_images(
                run.tb, run.model, tokenizer, sentence, step, figures=state["logged"] != step, projector=True
            )
        write_session(run.tb, run.cfg, start=False)

    run.trainer.add_event_handler(validation_event, on_validation)
    run.trainer.add_event_handler(Events.COMPLETED, on_completed)


def mark_session_start(writer, step: int) -> None:
    """A restart marker at `step` (what SummaryWriter(purge_step=...) writes): TensorBoard hides
    what the run logged before it at `step` or later. Every start marks the first step it trains:
    TensorBoard's Python loader takes a run's first marker as its start and hides nothing, so a
    fresh run needs one for a resume's marker to hide what an interrupted attempt logged."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    writer.file_writer.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))
    writer.flush()


def log_test_scores(run_dir: Path, scores: dict, step: Optional[int]) -> None:
    """test.py's scores as scalars of the run, where the HParams table finds them. The table ticks the
    first five metrics in name order by default: test/chrf, test/length_ratio, test/nltk_bleu4,
    test/sacrebleu (the headline), then the length protocol's test_concat/k<K>_*, which sort after test/."""
    from torch.utils.tensorboard import SummaryWriter

    if step is None or not (run_dir / "tb").is_dir():
        return
    writer = SummaryWriter(log_dir=str(run_dir / "tb"))
    try:
        for key in (*(m.name for m in METRICS), "length_ratio"):
            writer.add_scalar(f"test/{key}", scores[key], step)
        for row in scores.get("concat") or []:
            writer.add_scalar(f"test_concat/k{row['k']}_{HEADLINE}", row[HEADLINE], step)
            writer.add_scalar(f"test_concat/k{row['k']}_length_ratio", row["length_ratio"], step)
        writer.add_text(
            "test/signature", f"{scores['sacrebleu_signature']} (chrF: {scores.get('chrf_signature')})", step
        )
    finally:
        writer.close()
