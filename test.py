#!/usr/bin/env python
"""Translate a test set and score it whole: `python test.py --help`.
The command's flags and work: commands/test.py."""

from commands.cli import main_guard
from commands.test import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
