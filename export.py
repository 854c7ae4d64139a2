#!/usr/bin/env python
"""Export a trained model to a self-contained folder (safetensors, config, tokenizer, model card):
`python export.py --help`.
The command's flags and work: commands/export.py."""

from commands.cli import main_guard
from commands.export import main

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
