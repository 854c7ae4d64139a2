"""Shared command-line plumbing: `--config`, `--run`, `--set`, `--model_path` resolution."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from utils.checkpoint import CheckpointError
from utils.config import ConfigError


def add_config_args(parser: argparse.ArgumentParser, model_path: bool = False) -> None:
    parser.add_argument("--config", help="YAML experiment config (e.g. configs/demo/sinusoidal.yaml)")
    parser.add_argument("--run", help="a run folder (runs/<name>): use its config and its best checkpoint")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set model.positional.name=rope (repeatable)")
    if model_path:
        parser.add_argument("--model_path", help="a checkpoint file (.pt); self-contained, no config needed")


def resolve_checkpoint(args: argparse.Namespace) -> Path:
    """The checkpoint named by --model_path, or the best one of --run, or of the --config's run folder."""
    from utils.checkpoint import find_best_checkpoint
    from utils.config import load_config

    if args.model_path:
        return Path(args.model_path)
    if args.run:
        return find_best_checkpoint(args.run)
    if args.config:
        return find_best_checkpoint(load_config(args.config, args.overrides).resolved_run_dir)
    raise ConfigError("say which model to use: --model_path <checkpoint.pt>, --run runs/<name>, "
                      "or --config <file.yaml> (its run folder's best checkpoint)")


def run_dir_of_checkpoint(path: Path) -> Path:
    """runs/<name>/checkpoints/x.pt -> runs/<name>; a loose checkpoint -> its folder."""
    path = Path(path).resolve()
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def main_guard(main, argv: Optional[list[str]] = None) -> int:
    """Run `main`; turn the project's expected errors into one clear line and exit code 2."""
    from data.parallel_text import CorpusError
    from tokenizer import TokenizerError

    try:
        return main(argv) or 0
    except (ConfigError, CheckpointError, CorpusError, TokenizerError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:
        print(f"error: training diverged ({e}). The checkpoints written before are kept; try a lower "
              f"training.lr, training.clip_grad_norm, or more warmup, and resume or restart.", file=sys.stderr)
        return 3


def check_model_matches(config_path: str, overrides: list[str], ckpt_cfg, ckpt_path: Path):
    """A --config given beside a checkpoint must describe the same model; its data/decoding settings win."""
    from utils.config import flatten, load_config, to_dict

    given = load_config(config_path, overrides)
    ckpt_model, given_model = flatten(to_dict(ckpt_cfg.model)), flatten(to_dict(given.model))
    diff = sorted(k for k in set(ckpt_model) | set(given_model) if ckpt_model.get(k) != given_model.get(k))
    if diff:
        details = "; ".join(f"model.{k}: checkpoint={ckpt_model.get(k)!r} config={given_model.get(k)!r}" for k in diff)
        raise CheckpointError(f"{ckpt_path} was trained with a different model than {config_path}: {details}. "
                              f"Drop --config (the checkpoint carries its own) or pick the matching config.")
    given.model = ckpt_cfg.model
    return given
