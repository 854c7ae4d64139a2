#!/usr/bin/env python
"""Translate French sentences with a trained model: `python inference.py --help`.
The command's flags and work: commands/inference.py."""

from commands.cli import main_guard
from commands.inference import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
