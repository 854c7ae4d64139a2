#!/usr/bin/env python
"""Summarise run folders into one results table, its findings and plots: `python compare.py --help`.
The command's flags and work: commands/compare.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.compare")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
