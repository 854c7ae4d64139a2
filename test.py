#!/usr/bin/env python
"""Translate a test set and score it whole: `python test.py --help`.
The command's flags and work: commands/test.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.test")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
