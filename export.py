#!/usr/bin/env python
"""Export a trained model to a self-contained folder (safetensors, config, tokenizer, model card):
`python export.py --help`.
The command's flags and work: commands/export.py."""

from commands.cli import lazy_main, main_guard

main = lazy_main("commands.export")  # imported inside the guard: a Ctrl-C while torch loads is one line too

if __name__ == "__main__":
    raise SystemExit(main_guard(main))
