#!/usr/bin/env python
"""Average the weights of a run's last N checkpoints into one checkpoint: `python average.py --help`.
The command's flags and work: commands/average.py."""

from commands.average import main
from commands.cli import main_guard

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
