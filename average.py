#!/usr/bin/env python
"""Average the weights of a run's last N checkpoints into one checkpoint: `python average.py --help`.
The command's flags and work: commands/average.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.average")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
