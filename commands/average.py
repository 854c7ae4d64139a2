"""Average the weights of a run's last N checkpoints (as fairseq/OpenNMT offer) into one checkpoint.

Examples:
  python average.py --run runs/demo/rope --average_last 3
  python test.py --model_path runs/demo/rope/checkpoints/averaged_last3.pt --output runs/demo/rope/test_avg3

The result is self-contained like any checkpoint (config and tokenizer from the newest input).
Keep enough checkpoints while training: training.keep_last (default 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from artifacts.checkpoint import CheckpointError, check_finite_weights, checkpoint_step, read_checkpoint, saved_config
from artifacts.loading import check_checkpoint_of_run
from commands.cli import command_parser, parse_command
from settings.config import ConfigError
from utils.errors import WriteError
from utils.files import atomic_save, check_target, remove_own_temporaries
from utils.run_folder import run_folder_above

AVERAGE_FIX = "the average would be NaN: average fewer (--average_last) or other checkpoints"


def average_checkpoints(paths: list[Path]) -> dict:
    """A checkpoint dict whose float weights are the element-wise mean of `paths` (newest last)."""
    total: Optional[dict] = None
    for path in paths:
        ckpt = read_checkpoint(path)
        check_checkpoint_of_run(path, saved_config(ckpt))  # the run's own model, not a copied-in one
        state = ckpt["model"]
        check_finite_weights(path, state, AVERAGE_FIX)
        if total is None:
            total = {k: v.double() if v.is_floating_point() else v.clone() for k, v in state.items()}
        elif state.keys() != total.keys() or any(v.shape != total[k].shape for k, v in state.items()):
            raise CheckpointError(
                f"{path} holds a different model than {paths[0]} (other weights or shapes): they "
                f"cannot be averaged; average checkpoints of one training run"
            )
        else:
            for k, v in state.items():
                if v.is_floating_point():
                    total[k] += v.double()
    newest = read_checkpoint(paths[-1])
    model = {k: (v / len(paths)).to(newest["model"][k].dtype) if v.is_floating_point() else v for k, v in total.items()}
    return {"model": model, "meta": newest["meta"], "averaged_from": [str(p) for p in paths]}


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        __doc__,
        run="the run folder whose newest checkpoints to average",
        output="output file (default: <run>/checkpoints/averaged_lastN.pt)",
        overwrite="the --output file (by default <run>/checkpoints/averaged_lastN.pt)",
    )
    parser.add_argument("--average_last", type=int, required=True, metavar="N", help="how many checkpoints")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    return average(**vars(parse_command(build_parser(), argv)))


def newest_checkpoints(run: str, count: int) -> list[Path]:
    """The run's checkpoints of its `count` newest steps (one per step), oldest first."""
    ckpt_dir = Path(run) / "checkpoints"
    if not ckpt_dir.is_dir():
        raise CheckpointError(f"--run {run} is not a run folder with checkpoints (no {ckpt_dir})")
    by_step: dict[int, Path] = {}
    for path in sorted(ckpt_dir.glob("*.pt")):
        step = checkpoint_step(path)
        if step is not None and not path.name.startswith("averaged"):
            by_step.setdefault(step, path)
    if len(by_step) < count:
        raise CheckpointError(
            f"{ckpt_dir} has checkpoints of {len(by_step)} steps ({sorted(by_step)}); "
            f"cannot average the last {count}. Keep more with training.keep_last."
        )
    return [by_step[s] for s in sorted(by_step)[-count:]]


def average(run: Optional[str], average_last: int, output: Optional[str] = None, overwrite: bool = False) -> int:
    """Average the run's `average_last` newest checkpoints into `output`, as average.py does."""
    if not run:
        raise ConfigError("say which run: --run runs/<name> (its newest checkpoints are averaged)")
    if average_last < 1:
        raise ConfigError(
            f"--average_last must be at least 1 (how many of the newest checkpoints to average), got {average_last}"
        )
    paths = newest_checkpoints(run, average_last)
    out = Path(output) if output else Path(run) / "checkpoints" / f"averaged_last{average_last}.pt"
    # its own averaged_*.pt may be replaced; a training checkpoint, an input or a user's file never
    check_target(out, "--output", inputs=paths, overwrite=overwrite, own=("checkpoints/averaged_*.pt",))
    holder = run_folder_above(out.parent)
    if holder is not None and holder != Path(run).resolve():  # `own` holds only in the averaged run
        raise WriteError(
            f"--output {out} is inside the run folder {holder}, but the checkpoints averaged are "
            f"{run}'s: it would pass for {holder.name}'s own; write it to {Path(run) / 'checkpoints'} "
            f"or outside any run folder"
        )
    for stale in remove_own_temporaries([out]):  # a killed average.py's half-written checkpoint
        print(f"removed {stale}, left by an average.py that was stopped while writing")
    atomic_save(average_checkpoints(paths), out, replace=overwrite)  # (never over one that appeared meanwhile)
    print(f"averaged {', '.join(p.name for p in paths)} -> {out}")
    return 0
