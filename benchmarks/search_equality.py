#!/usr/bin/env python
"""Same hypotheses? Today's search (decoding/search.py: no host reads per step) against the search
before issue 47 (benchmarks/legacy_search.py), on trained runs' test splits.

For each run: its best checkpoint translates its test split greedy and with beam 4 (the run's own
length penalty), once through each search, in this process, with the same batches. Reports the
share of test lines whose hypothesis is identical and the sacreBLEU of each; writes
benchmarks/results/search_equality.json and prints a Markdown table.

  python benchmarks/search_equality.py runs/demo/sinusoidal runs/demo/learnable runs/demo/rope
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SEARCHES = {"greedy": {"strategy": "greedy"}, "beam4": {"strategy": "beam", "beam_size": 4}}


def translate_with(search_module, model, tokenizer, sources, settings) -> tuple[list[str], float]:
    """The test split's hypotheses through `search_module`'s greedy_search/beam_search, and the seconds."""
    import decoding.backend as backend
    from evaluation.translate import translate

    saved = backend.greedy_search, backend.beam_search
    backend.greedy_search, backend.beam_search = search_module.greedy_search, search_module.beam_search
    try:
        start = time.perf_counter()
        found = translate(backend.HarnessDecoder(model), tokenizer, sources, settings)
        return [t.text for t in found], time.perf_counter() - start
    finally:
        backend.greedy_search, backend.beam_search = saved


def compare_run(run: str) -> dict:
    import legacy_search

    import decoding.search as today
    import models.positional_encodings  # noqa: F401
    from artifacts.loading import load_model
    from artifacts.lookup import find_model
    from evaluation.metrics import score_translations
    from evaluation.test_set import read_config_split

    loaded = load_model(find_model(run=run))
    cfg, tokenizer, model = loaded.config, loaded.tokenizer, loaded.model
    pairs, _ = read_config_split(cfg.data, "test")
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    row: dict = {"run": run, "lines": len(pairs)}
    for name, changes in SEARCHES.items():
        settings = dataclasses.replace(cfg.decoding, **changes)
        new, new_s = translate_with(today, model, tokenizer, sources, settings)
        old, old_s = translate_with(legacy_search, model, tokenizer, sources, settings)
        row[f"{name}_identical"] = round(sum(a == b for a, b in zip(new, old)) / len(new), 4)
        row[f"{name}_sacrebleu"] = score_translations(new, references).as_dict()["sacrebleu"]
        row[f"{name}_legacy_sacrebleu"] = score_translations(old, references).as_dict()["sacrebleu"]
        row[f"{name}_seconds"], row[f"{name}_legacy_seconds"] = round(new_s, 2), round(old_s, 2)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="trained run folders (their test split is decoded)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/search_equality.json"))
    args = parser.parse_args(argv)
    missing = [run for run in args.runs if not (Path(run) / "config.yaml").is_file()]
    if missing:
        parser.error(f"not a run folder (no config.yaml): {', '.join(missing)}")
    rows = [compare_run(run) for run in args.runs]
    print("| run | lines | greedy identical | ΔBLEU | beam 4 identical | ΔBLEU | beam 4 s (today / legacy) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['run']} | {r['lines']} | {r['greedy_identical']:.2%} | "
            f"{r['greedy_sacrebleu'] - r['greedy_legacy_sacrebleu']:+.2f} | {r['beam4_identical']:.2%} | "
            f"{r['beam4_sacrebleu'] - r['beam4_legacy_sacrebleu']:+.2f} | "
            f"{r['beam4_seconds']:.1f} / {r['beam4_legacy_seconds']:.1f} |"
        )
    from utils.files import atomic_write_text

    atomic_write_text(Path(args.output), json.dumps({"runs": rows}, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
