#!/usr/bin/env python
"""Translate French sentences with a trained checkpoint (greedy or beam search, n-best).

Examples:
  python inference.py --model_path runs/demo/rope/checkpoints/best_....pt --src_text "Je t'aime."
  python inference.py --run runs/demo/rope --src_text "Bonjour !" "Où est la gare ?" --nbest 3
  python inference.py --run runs/demo/rope --input sentences.fr > out.en
  echo "Merci beaucoup." | python inference.py --run runs/demo/rope

One output line per input line (the best translation); with --nbest N, N lines
"<index>\t<score>\t<translation>" per input. The checkpoint is self-contained: no config needed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from data.parallel_text import decode_utf8, read_text, split_lines
from evaluation.translate import max_positions, translate
from training.checkpoint import check_model_matches, load_for_inference, resolve_checkpoint
from utils.cli import add_config_args, main_guard
from utils.runtime import pick_device


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, model_path=True)
    parser.add_argument("--src_text", nargs="+", action="extend", help="sentence(s) to translate")
    parser.add_argument("--input", help="a file with one sentence per line ('-' for stdin)")
    parser.add_argument("--strategy", choices=["greedy", "beam"], help="search (default: the config's)")
    parser.add_argument("--beam_size", type=int, help="beam width (default: the config's)")
    parser.add_argument("--nbest", type=int, help="print the N best translations with their scores")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    return parser.parse_args(argv)


def input_lines(text: str) -> list[str]:
    """One sentence per line (newline or CRLF endings); other line-break characters stay in the sentence."""
    return [line.rstrip("\r") for line in split_lines(text)]


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if args.src_text:
        sentences = list(args.src_text)
    elif args.input and args.input != "-":
        sentences = input_lines(read_text(args.input))  # missing, not UTF-8: one line naming file and line
    elif args.input == "-" or not sys.stdin.isatty():
        sentences = input_lines(decode_utf8(sys.stdin.buffer.read(), "stdin"))
    else:
        print("error: nothing to translate: give --src_text \"...\", --input FILE, or pipe text on stdin",
              file=sys.stderr)
        return 2
    overrides = list(args.overrides)
    for key, value in (("strategy", args.strategy), ("beam_size", args.beam_size), ("nbest", args.nbest)):
        if value is not None:
            overrides.append(f"decoding.{key}={value}")
    if args.nbest and args.nbest > 1 and not args.strategy:
        overrides.append("decoding.strategy=beam")
        if not args.beam_size:
            overrides.append(f"decoding.beam_size={max(args.nbest, 5)}")
    ckpt = resolve_checkpoint(args)
    device = pick_device(args.device)
    cfg, tokenizer, model = load_for_inference(ckpt, overrides, device=str(device))
    if args.config:
        cfg = check_model_matches(args.config, overrides, cfg, ckpt)
    settings = cfg.decoding
    for i, out in enumerate(translate(model, tokenizer, sentences, settings, device)):
        if out.truncated_from is not None:
            print(f"warning: line {i + 1}: the input has {out.truncated_from} tokens; this model takes at most "
                  f"{max_positions(model)} (model.positional.max_positions), so it was truncated", file=sys.stderr)
        if settings.nbest > 1 and settings.strategy == "beam":
            for text, score in out.hypotheses:
                print(f"{i}\t{score:.4f}\t{text}")
        else:
            print(out.text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
