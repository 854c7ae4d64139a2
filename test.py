#!/usr/bin/env python
"""Translate a test set and score it whole: sacreBLEU (with signature), chrF, nltk BLEU-4 on word
tokens, the hypothesis/reference length ratio, scores per source length, and optionally the
length-extrapolation protocol (--concat); and a teacher-forced length diagnostic that does not depend
on when the model stops: the references' NLL and accuracy per target position, per k, beyond and
within the training length, and p(EOS) at the sentence boundaries of joined inputs
(evaluation/teacher_forced.py; `--set evaluation.teacher_forced=false` skips it).

Examples:
  python test.py --run runs/demo/rope                       # the run's best checkpoint, its test split
  python test.py --run runs/demo/rope --src tst2017.fr.xml --ref tst2017.en.xml --output runs/demo/rope/tst2017
  python test.py --run runs/length/rope --concat 1 2 4 8    # inputs of k consecutive test pairs joined
  python test.py --config configs/demo/rope.yaml --model_path runs/demo/rope/checkpoints/best_....pt
  python test.py --model_path ckpt.pt --set decoding.beam_size=1 --output /tmp/greedy --overwrite

Writes into <run>/test/ (or --output): hypotheses.txt (exactly one detokenized line per test
pair, in test order), references.txt, sources.txt, source_lengths.txt (subword tokens per source,
for compare.py's findings per length bucket) and scores.json; with --concat (or the config's
evaluation.concat) also concat/k<K>/ for each K. Every pair is scored: an empty source gets an
empty hypothesis, a source longer than the model can represent is truncated and counted.
--src/--ref take plain text (.gz allowed), raw WIT3 train.tags files or WIT3 XML (aligned by
document and segment id; documents keep --concat inputs within one talk).
The scores of a run's own test split also go to its TensorBoard events (test/*), where the
HParams dashboard shows them beside the run's settings.
"""

from __future__ import annotations

import argparse
from typing import Optional

from commands.scoring import run_test
from utils.cli import RUN_HELP, TEST_TIME_SETS, command_parser, main_guard


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = command_parser(__doc__, config=True, run=RUN_HELP, sets=TEST_TIME_SETS, model_path=True, device=True,
                            output="where to write the outputs (default: <run>/<split>/, or <run>/test_<src file "
                                   "name>/ with --src)",
                            overwrite="replace earlier outputs in the output folder")
    parser.add_argument("--split", choices=["test", "valid"], help="which split of the config (default: test)")
    parser.add_argument("--src", metavar="FILE", help="score this source file instead of a split (needs --ref)")
    parser.add_argument("--ref", metavar="FILE", help="the reference translations of --src, line by line")
    parser.add_argument("--concat", type=int, nargs="+", metavar="K",
                        help="also score inputs of K consecutive pairs joined, for each K (e.g. 1 2 4 8); "
                             "default: the config's evaluation.concat")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    return run_test(**vars(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
