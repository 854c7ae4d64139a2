#!/usr/bin/env python
"""Plots of positional encodings and attention, written as PNG files: `python visualize.py --help`.
The command's flags and work: commands/visualize.py."""

from commands.cli import main_guard
from commands.visualize import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
