#!/usr/bin/env python
"""Train, test and compare a list of configs in one command, resumable: `python sweep.py --help`.
The command's flags and work: commands/sweep.py (one run: commands/sweep_job.py)."""

from commands.cli import main_guard
from commands.sweep import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
