#!/usr/bin/env python
"""Plots of positional encodings and attention, written as PNG files: `python visualize.py --help`.
The command's flags and work: commands/visualize.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.visualize")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
