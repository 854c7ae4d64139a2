#!/usr/bin/env python
"""Summarise run folders into one results table, its findings and plots: `python compare.py --help`.
The command's flags and work: commands/compare.py."""

from commands.cli import main_guard
from commands.compare import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
