"""Train an encoder-decoder Transformer from a YAML config (PyTorch-Ignite engine).

Examples:
  python train.py --config configs/demo/sinusoidal.yaml
  python train.py --config configs/iwslt2017/transformer_512dh8_e6d6_epochbased_rope.yaml
  python train.py --config configs/demo/rope.yaml --set training.max_steps=100 --set run_dir=runs/try
  python train.py --run runs/demo/rope --resume        # continue exactly where it stopped

A run folder gets: config.yaml (resolved), tokenizer.json, checkpoints/ (best-k + last,
self-contained), TensorBoard events (tb/), metrics.jsonl (machine-readable log)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from commands.cli import OVERWRITE_HELP, UsageError, command_parser, parse_command, refuse_together
from settings.config import ConfigError, ExperimentConfig, load_config
from training.run import train_run
from utils import run_files
from utils.run_folder import is_run_folder


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        __doc__,
        config=True,
        run="a run folder (runs/<name>) to continue from its last checkpoint",
        sets="override a config value, e.g. --set model.positional.name=rope (repeatable)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--resume", action="store_true", help="continue the run in the config's run folder from its last checkpoint"
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help=f"{OVERWRITE_HELP}: delete the run folder (the harness's own only) and start over",
    )
    return parser


def resolve_config(config: Optional[str], run: Optional[str], overrides: Sequence[str]) -> ExperimentConfig:
    """The config to train: the run folder's own (`--run`), or the config file with `--set` applied."""
    if run:
        saved = Path(run) / run_files.CONFIG
        if not saved.is_file():
            raise ConfigError(
                f"--run {run}: not a run folder (no config.yaml in it); to start a new run give --config <file.yaml>"
            )
        return load_config(saved, [*overrides, f"run_dir={run}"])
    # With --config X --resume, X (and --set) say what the resumed run follows: the start compares it
    # with the checkpoint's config and refuses any change a resume may not make
    return load_config(config, list(overrides))


def train(
    config: Optional[str] = None,
    run: Optional[str] = None,
    overrides: Sequence[str] = (),
    resume: bool = False,
    overwrite: bool = False,
    cfg: Optional[ExperimentConfig] = None,
) -> int:
    """Train one run, as train.py does (a sweep's jobs call this, with `cfg`: `config` with its
    overrides, validated already, never loaded again): 0 when training finished, EXIT_INTERRUPTED
    when a signal stopped it after a checkpoint (resumable, not finished)."""
    if resume and run is None and config is None:
        raise ConfigError("--resume needs --run runs/<name> or --config <file.yaml>")
    if run is None and config is None:
        raise ConfigError("say what to train: --config <file.yaml>, or --run runs/<name> to continue a run")
    resume = resume or run is not None  # `--run` names an existing run: continue it
    cfg = cfg if cfg is not None else resolve_config(config, run, overrides)
    if config is not None and (overwrite or resume):
        check_config_names_its_folder(Path(config), cfg, "--overwrite" if overwrite else "--resume")
    return train_run(cfg, resume=resume, overwrite=overwrite)


def check_config_names_its_folder(config: Path, cfg: ExperimentConfig, flag: str) -> None:
    """A run folder's config.yaml names the folder it was trained in (`run_dir`): in a copy of the run,
    that is the original. Starting the copy over with it would delete the original's checkpoints and
    scores (--overwrite), or continue the original (--resume): refused, naming both folders."""
    folder = config.resolve().parent
    if config.name != run_files.CONFIG or not is_run_folder(folder):
        return
    target = Path(cfg.resolved_run_dir).resolve()
    if target != folder:
        raise ConfigError(
            f"{config} is the config of the run folder {folder}, but its run_dir names {target} (the run it was "
            f"copied from?): {flag} would act on {target}; add --set run_dir={folder} to act on this folder"
        )


def check_flags(args: argparse.Namespace) -> None:
    """Flags that would silently ignore one another: --config beside --run (the run's own config
    would be trained, the file ignored), --overwrite beside --run (which continues the run)."""
    refuse_together(args, "the config to train (--run: the run folder's own config.yaml)", "--config", "--run")
    if args.run and args.overwrite:
        raise UsageError(
            f"--run {args.run} continues that run and --overwrite deletes it: to start it over, give "
            f"--config {Path(args.run) / 'config.yaml'} --overwrite; to continue it, drop --overwrite"
        )


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_command(build_parser(), argv)
    check_flags(args)
    return train(**vars(args))
