#!/usr/bin/env python
"""Translate a test split and score it: sacreBLEU (with signature), chrF, nltk BLEU-4 on word tokens.

Examples:
  python test.py --run runs/demo/rope                       # the run's best checkpoint, its test split
  python test.py --config configs/demo/rope.yaml --model_path runs/demo/rope/checkpoints/best_....pt
  python test.py --model_path ckpt.pt --set decoding.beam_size=1 --output_dir /tmp/greedy --overwrite

Writes into <run>/test/ (or --output_dir): hypotheses.txt (one detokenized line per test
sentence, in test order), references.txt, sources.txt and scores.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Optional

from tqdm import tqdm

from data import prepare_splits
from utils.checkpoint import load_for_inference
from utils.cli import add_config_args, check_model_matches, main_guard, resolve_checkpoint, run_dir_of_checkpoint
from utils.metrics import score_by_length, score_subset, score_translations
from utils.config import to_dict
from utils.runtime import log, pick_device
from utils.translate import translate


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(parser, model_path=True)
    parser.add_argument("--split", default="test", choices=["test", "valid"], help="which split to translate")
    parser.add_argument("--output_dir", help="where to write the outputs (default: <run>/<split>/)")
    parser.add_argument("--overwrite", action="store_true", help="replace earlier outputs in the output folder")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    ckpt = resolve_checkpoint(args)
    device = pick_device(args.device)
    cfg, tokenizer, model = load_for_inference(ckpt, args.overrides, device=str(device))
    if args.config:
        cfg = check_model_matches(args.config, args.overrides, cfg, ckpt)
    out_dir = Path(args.output_dir) if args.output_dir else run_dir_of_checkpoint(ckpt) / args.split
    if (out_dir / "scores.json").exists() and not args.overwrite:
        raise FileExistsError(f"{out_dir / 'scores.json'} exists; pass --overwrite to replace it "
                              f"or --output_dir <folder> to keep both")
    split = prepare_splits(cfg.data, tokenizer, (args.split,), log=log)[args.split]
    settings = cfg.decoding
    log(f"translating {len(split):,} {args.split} sentences with {ckpt} "
        f"({settings.strategy}, beam {settings.beam_size if settings.strategy == 'beam' else 1})")
    start = time.time()
    outputs = translate(model, tokenizer, split.raw_src, settings, device,
                        progress=lambda b: tqdm(b, desc="translating", unit="batch", mininterval=5))
    seconds = time.time() - start
    hyps = [o.text for o in outputs]
    scores = score_translations(hyps, split.raw_tgt).as_dict()
    scores.update(split=args.split, checkpoint=str(ckpt), positional=cfg.model.positional.name,
                  decoding=to_dict(settings), translate_seconds=round(seconds, 2),
                  sentences_per_second=round(len(hyps) / max(seconds, 1e-9), 2),
                  failed=[i for i, o in enumerate(outputs) if o.error])
    lengths = [len(ids) for ids in split.src]
    scores["by_source_length"] = score_by_length(hyps, split.raw_tgt, lengths, cfg.evaluation.length_buckets)
    if cfg.data.train_max_src_len is not None:
        longer = score_subset(hyps, split.raw_tgt, [n > cfg.data.train_max_src_len for n in lengths])
        scores["longer_than_training"] = {"train_max_src_len": cfg.data.train_max_src_len, **longer}
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, lines in (("hypotheses.txt", hyps), ("references.txt", split.raw_tgt), ("sources.txt", split.raw_src)):
        (out_dir / name).write_text("".join(line.replace("\n", " ") + "\n" for line in lines), encoding="utf-8")
    (out_dir / "scores.json").write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    print(f"sacreBLEU {scores['sacrebleu']:.2f}  chrF {scores['chrf']:.2f}  nltk BLEU-4 {scores['nltk_bleu4']:.4f} "
          f"({scores['nltk_tokenization']})  on {scores['num_sentences']} sentences")
    print(f"signature: {scores['sacrebleu_signature']}")
    print("by source length (subword tokens): " + "  ".join(
        f"{b['bucket']}: {b['sacrebleu'] if b['sacrebleu'] is not None else '-'} (n={b['num_sentences']})"
        for b in scores["by_source_length"]))
    if "longer_than_training" in scores:
        lt = scores["longer_than_training"]
        print(f"longer than training (> {lt['train_max_src_len']} tokens): sacreBLEU {lt['sacrebleu']} "
              f"chrF {lt['chrf']} (n={lt['num_sentences']})")
    print(f"outputs: {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
