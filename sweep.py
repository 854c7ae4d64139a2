#!/usr/bin/env python
"""Train, test and compare a list of configs in one command (sequential and resumable).

Example (what `make demo` runs):
  python sweep.py configs/demo/sinusoidal.yaml configs/demo/learnable.yaml configs/demo/rope.yaml \
      --output runs/demo/summary

A run whose test/scores.json exists is skipped; a run folder with checkpoints but no scores
is resumed (training continues from its last checkpoint, then it is tested). Pass --set
overrides to every run (e.g. --set training.max_steps=50 for a smoke test).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

import compare
import test as test_cmd
import train as train_cmd
from utils.cli import main_guard
from utils.config import load_config
from utils.runtime import log


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="YAML configs to run, in order")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override applied to every config (repeatable)")
    parser.add_argument("--output", help="path prefix of the summary table (.md and .csv)")
    args = parser.parse_args(argv)
    run_dirs = []
    for config in args.configs:
        cfg = load_config(config, args.overrides)
        run_dir = cfg.resolved_run_dir
        run_dirs.append(run_dir)
        sets = [x for o in args.overrides for x in ("--set", o)]
        if (run_dir / "test" / "scores.json").is_file():
            log(f"sweep: {run_dir} is finished (test/scores.json exists): skipped")
            continue
        resume = (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").glob("last_*.pt"))
        log(f"sweep: {'resuming' if resume else 'training'} {config} -> {run_dir}")
        rc = train_cmd.main(["--config", config, *sets, *(["--resume"] if resume else ["--overwrite"])])
        if rc:
            return rc
        rc = test_cmd.main(["--run", str(run_dir), *sets, "--overwrite"])
        if rc:
            return rc
    return compare.main([str(d) for d in run_dirs] + (["--output", args.output] if args.output else []))


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
