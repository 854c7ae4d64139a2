#!/usr/bin/env python
"""Same hypotheses? Today's search against a contender, on trained models' test splits.

Contenders (`--contender`):

  legacy        the search before issue 47 (benchmarks/legacy_search.py): host reads every step
  cuda_graphs   decoding.cuda_graphs: the fixed-shape step (decoding/fixed_shape.py), captured as CUDA
                graphs on a GPU (on a CPU the same step runs eagerly)

For each model (a run folder: its best checkpoint; or a checkpoint / an export folder, export.py):
its test split translated greedy and with beam 4 (its own length penalty), once each way, in this
process, with the same batches, on `--device`. Reports the share of test lines whose hypothesis is
identical and the sacreBLEU of each; writes benchmarks/results/search_equality.json (with
`--contender cuda_graphs`: graph_equality_<device>.json) and prints a Markdown table.

  python benchmarks/search_equality.py runs/demo/sinusoidal runs/demo/learnable runs/demo/rope
  python benchmarks/search_equality.py --contender cuda_graphs --device cuda exports/demo_sinusoidal
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

import torch  # noqa: E402
from common import environment  # noqa: E402

from artifacts.export import is_export  # noqa: E402
from utils import run_files  # noqa: E402

SEARCHES = {"greedy": {"strategy": "greedy"}, "beam4": {"strategy": "beam", "beam_size": 4}}


def translate_with(model, tokenizer, sources, settings, device: str, search_module=None) -> tuple[list[str], float]:
    """The test split's hypotheses (through `search_module`'s greedy_search/beam_search if given), and
    the seconds."""
    import decoding.backend as backend
    from evaluation.translate import translate

    saved = backend.greedy_search, backend.beam_search
    if search_module is not None:
        backend.greedy_search, backend.beam_search = search_module.greedy_search, search_module.beam_search
    try:
        start = time.perf_counter()
        found = translate(backend.HarnessDecoder(model), tokenizer, sources, settings, device)
        if device == "cuda":
            torch.cuda.synchronize()
        return [t.text for t in found], time.perf_counter() - start
    finally:
        backend.greedy_search, backend.beam_search = saved


def compare(path: str, contender: str, device: str) -> dict:
    """One model's row: per search, the share of identical lines, each way's sacreBLEU and seconds."""
    from artifacts.loading import load_model
    from artifacts.lookup import find_model
    from evaluation.test_set import read_config_split
    from utils.metrics import score_translations

    is_run = (Path(path) / run_files.CONFIG).is_file() and not is_export(path)
    loaded = load_model(find_model(run=path) if is_run else find_model(model_path=path), device=device)
    cfg, tokenizer, model = loaded.config, loaded.tokenizer, loaded.model
    pairs, _ = read_config_split(cfg.data, "test")
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    row: dict = {"run": path, "lines": len(pairs), "contender": contender, "device": device}
    for name, changes in SEARCHES.items():
        settings = dataclasses.replace(cfg.decoding, **changes)
        ours, ours_s = translate_with(model, tokenizer, sources, settings, device)
        if contender == "legacy":
            import legacy_search

            other, other_s = translate_with(model, tokenizer, sources, settings, device, legacy_search)
        else:
            other, other_s = translate_with(
                model, tokenizer, sources, dataclasses.replace(settings, cuda_graphs=True), device
            )
        row[f"{name}_identical"] = round(sum(a == b for a, b in zip(ours, other)) / len(ours), 4)
        row[f"{name}_sacrebleu"] = score_translations(ours, references)["sacrebleu"]
        row[f"{name}_{contender}_sacrebleu"] = score_translations(other, references)["sacrebleu"]
        row[f"{name}_seconds"], row[f"{name}_{contender}_seconds"] = round(ours_s, 2), round(other_s, 2)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="trained run folders, checkpoints or export folders")
    parser.add_argument("--contender", choices=("legacy", "cuda_graphs"), default="legacy")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--output", help="default: benchmarks/results/search_equality.json (see above)")
    args = parser.parse_args(argv)
    missing = [m for m in args.models if not Path(m).exists()]
    if missing:
        parser.error(f"no such run, checkpoint or export: {', '.join(missing)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    default = "search_equality.json" if args.contender == "legacy" else f"graph_equality_{args.device}.json"
    output = Path(args.output or ROOT / "benchmarks" / "results" / default)
    rows = [compare(m, args.contender, args.device) for m in args.models]
    c = args.contender
    print(f"| model | lines | greedy identical | ΔBLEU | beam 4 identical | ΔBLEU | beam 4 s (today / {c}) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['run']} | {r['lines']} | {r['greedy_identical']:.2%} | "
            f"{r['greedy_sacrebleu'] - r[f'greedy_{c}_sacrebleu']:+.2f} | {r['beam4_identical']:.2%} | "
            f"{r['beam4_sacrebleu'] - r[f'beam4_{c}_sacrebleu']:+.2f} | "
            f"{r['beam4_seconds']:.1f} / {r[f'beam4_{c}_seconds']:.1f} |"
        )
    from utils.files import atomic_write_text

    settings = environment(args.device)
    atomic_write_text(output, json.dumps({"settings": settings, "runs": rows}, indent=2) + "\n")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
