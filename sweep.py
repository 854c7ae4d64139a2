#!/usr/bin/env python
"""Train, test and compare a list of configs in one command, resumable: `python sweep.py --help`.
The command's flags and work: commands/sweep.py (one run: commands/sweep_job.py)."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.sweep")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
