"""Shared command-line plumbing: the `--config`/`--run`/`--set`/`--model_path` arguments and
`main_guard`, which turns expected errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from utils.errors import HarnessError


def add_config_args(parser: argparse.ArgumentParser, model_path: bool = False) -> None:
    parser.add_argument("--config", help="YAML experiment config (e.g. configs/demo/sinusoidal.yaml)")
    parser.add_argument("--run", help="a run folder (runs/<name>): use its config and its best checkpoint")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set model.positional.name=rope (repeatable)")
    if model_path:
        parser.add_argument("--model_path", help="a checkpoint file (.pt) or a folder written by export.py; "
                                                 "self-contained, no config needed")


def main_guard(main, argv: Optional[list[str]] = None) -> int:
    """Run `main`; turn the project's expected errors into one clear line and exit code 2."""
    try:
        return main(argv) or 0
    except (HarnessError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:
        print(f"error: training diverged ({e}). The checkpoints written before are kept; try a lower "
              f"training.lr, training.clip_grad_norm, or more warmup, and resume or restart.", file=sys.stderr)
        return 3
