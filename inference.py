#!/usr/bin/env python
"""Translate French sentences with a trained model: `python inference.py --help`.
The command's flags and work: commands/inference.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.inference")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
