#!/usr/bin/env python
"""Train an encoder-decoder Transformer from a YAML config: `python train.py --help`.
The command's flags and work: commands/train.py; the training itself: training/run.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.train")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
