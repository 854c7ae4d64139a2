#!/usr/bin/env python
"""Train an encoder-decoder Transformer from a YAML config: `python train.py --help`.
The command's flags and work: commands/train.py; the training itself: training/run.py."""

from commands.cli import main_guard
from commands.train import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
