#!/usr/bin/env python
"""Decoding speed and memory: this project's cached search vs no cache vs Hugging Face generate().

All contenders decode the same random source sentences with equal-sized models (6+6 layers,
d_model 512, 8 heads, FFN 2048, the same vocabulary size, random weights) and the same
forced output length (EOS forbidden before it, so the work is equal):

  ours greedy / beam-5, with the key/value cache   (decoding/search.py over decoding/step.py's CachedDecoder)
  ours greedy / beam-5, fixed shapes              (decoding/fixed_shape.py: decoding.cuda_graphs, a CUDA graph
                                                     per batch layout on a GPU; the same step eagerly on a CPU)
  ours greedy / beam-5, without the cache           (FullPrefixDecoder: the model's plain decode() of the whole
                                                     prefix each step, as the report did)
  MarianMTModel.generate(), greedy / num_beams=5    (transformers)
  CTranslate2 greedy / beam 5, float32 and int8     (ctranslate2 Translator.translate_batch on the same
                                                     random-weight model, converted in the case's process
                                                     by decoding/ctranslate2_spec.py before the timing)

Each case runs in a fresh process so that its peak memory (resident set, or CUDA peak
allocation on a GPU) is its own; every case runs with the same thread count (PyTorch's threads,
OMP_NUM_THREADS for both OpenMP runtimes, CTranslate2's intra_threads). Prints a table and writes
benchmarks/results/decode.json with `greedy_cached_over_uncached`, `beam5_over_hf_generate`,
`ct2_beam5_int8_over_hf_generate`, ... (ratios of sentences/second, RATIOS below).

  python benchmarks/decode.py            # full: 32 sentences, 50-token outputs, 3 repeats
  python benchmarks/decode.py --quick    # under 2 minutes on a 2-core CPU: 8 sentences, 1 repeat
  python benchmarks/decode.py --quick --rounds 3   # every case in 3 fresh processes, medians
  python benchmarks/decode.py --device cuda --sentences 2000 --max_tokens 30000 --cases ours_beam5_cached hf_beam5
      # a test set's worth, in token-budget batches (sorted by length, as test.py cuts them), the same
      # batches for both contenders
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (  # noqa: E402
    MODEL_SIZES,
    SIZE_HELP,
    add_rounds_flag,
    environment,
    ratio_spread,
    run_rounds,
    write_profile,
    write_results,
)
from decode_contenders import CT2_LENGTH_PENALTY, PAD, ct2_decoder, marian_decoder, our_decoder  # noqa: E402

CASES = [
    "ours_greedy_cached",
    "ours_greedy_uncached",
    "hf_greedy",
    "ours_beam5_cached",
    "ours_beam5_uncached",
    "hf_beam5",
    "ct2_greedy_float32",
    "ct2_greedy_int8",
    "ct2_beam5_float32",
    "ct2_beam5_int8",
    "ours_greedy_legacy",  # the search before issue 47 (benchmarks/legacy_search.py), cached step alike
    "ours_beam5_legacy",
    "ours_greedy_graphed",  # decoding.cuda_graphs: the fixed-shape step, captured on a GPU (eager on a CPU)
    "ours_beam5_graphed",
]


def make_sources(num: int, vocab: int, seed: int = 0):
    """Random token ids, source lengths 10..30 (the demo corpus' range), right-padded."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 31, (num,), generator=g)
    src = torch.full((num, int(lengths.max())), PAD, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


def token_budget_batches(src, max_tokens: int | None, beam: int) -> list:
    """The sources cut as test.py cuts a test set (evaluation/translate.py: make_batches): sorted by
    length, batch * longest * beam <= max_tokens; one batch of everything without a budget."""
    from evaluation.translate import make_batches

    if not max_tokens:
        return [src]
    lengths = src.ne(PAD).sum(1).tolist()
    return [src[rows][:, : max(lengths[i] for i in rows)] for rows in make_batches(lengths, max_tokens, beam)]


def run_case(
    case: str,
    num: int,
    out_len: int,
    repeats: int,
    threads: int,
    device: str,
    size: str,
    max_tokens: int | None,
    profile_dir: str | None,
    queue,
) -> None:
    """One contender in its own process: time `repeats` decodes, report throughput and peak memory."""
    os.environ["OMP_NUM_THREADS"] = str(threads)  # before torch and ctranslate2 load their OpenMP runtimes
    import torch

    torch.set_num_threads(threads)  # CTranslate2's intra_threads is torch.get_num_threads() (ctranslate2_backend)
    if device == "cuda":  # as inference.py does, for both contenders (both attend through SDPA)
        from utils.runtime import skip_cudnn_attention

        skip_cudnn_attention()
    sizes = MODEL_SIZES[size]
    beam = 5 if "beam" in case else 1
    batches = [b.to(device) for b in token_budget_batches(make_sources(num, sizes["vocab"]), max_tokens, beam)]
    decode, extra = case_decoder(case, batches, device, sizes, beam, out_len)
    times, tokens = time_decodes(decode, repeats, device)
    if profile_dir:  # where a decode's time goes: one more decode under torch.profiler, the busiest ops
        with torch.inference_mode():
            write_profile(lambda _: decode(), [None], device, Path(profile_dir) / f"profile_{case}.txt")
    seconds = statistics.median(times)
    memory_kind = "cuda_max_allocated" if device == "cuda" else "process_max_rss"
    if case.startswith("ct2") and device == "cuda":  # CTranslate2 allocates outside torch's allocator
        peak, memory_kind = None, "not_measured"
    elif device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(
        {
            "case": case,
            "beam": beam,
            "sentences": num,
            "batches": len(batches),
            "output_tokens": tokens,
            "seconds": seconds,
            "sentences_per_sec": num / seconds,
            "tokens_per_sec": tokens / seconds,
            "peak_memory_mb": peak,
            "memory_kind": memory_kind,
            **extra,
        }
    )


def case_decoder(case: str, batches: list, device: str, sizes: dict, beam: int, out_len: int) -> tuple:
    """(the case's `decode()` over the batches, what the results add about it)."""
    if case.startswith("ct2"):
        compute_type = case.rsplit("_", 1)[1]
        decode = ct2_decoder(batches, device, sizes, beam, out_len, compute_type)
        return decode, {"compute_type": compute_type, "length_penalty": CT2_LENGTH_PENALTY if beam > 1 else None}
    if case.startswith("hf"):
        return marian_decoder(batches, device, sizes, beam, out_len), {}
    kinds = {kind: kind in case for kind in ("uncached", "legacy", "graphed")}
    return our_decoder(batches, device, sizes, beam, out_len, **kinds), {}


def time_decodes(decode, repeats: int, device: str) -> tuple[list[float], int]:
    """(seconds of each of `repeats` timed decodes after one warm-up, the tokens of one decode)."""
    import torch

    with torch.inference_mode():
        decode()  # warm-up
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.synchronize()
        times, tokens = [], 0
        for _ in range(repeats):
            start = time.perf_counter()
            tokens = decode()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return times, tokens


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small version (< 2 min on 2 CPU cores)")
    parser.add_argument("--sentences", type=int, help="sentences per decode (default 32, quick 8)")
    parser.add_argument("--out_len", type=int, default=50, help="forced output length in tokens")
    parser.add_argument(
        "--max_tokens",
        type=int,
        metavar="N",
        help="decode in batches sorted by length with batch x longest source x beam <= N, the "
        "same batches for every contender of a beam size (as test.py cuts a test set with "
        "decoding.max_tokens; default: one batch)",
    )
    parser.add_argument("--repeats", type=int, help="timed repeats per case (median; default 3, quick 1)")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="also profile one more decode of each case (torch.profiler) and write the busiest operators "
        "to DIR/profile_<case>.txt",
    )
    add_rounds_flag(parser)
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=CASES,
        metavar="CASE",
        help="run only these cases, in this order (default: all; ratios need both of their cases). "
        "E.g. --cases ours_beam5_cached hf_beam5 skips the slow uncached ones. "
        f"Cases: {', '.join(CASES)}",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--size", default="report", choices=sorted(MODEL_SIZES), help=SIZE_HELP)
    parser.add_argument(
        "--output", default=None, help="JSON file (default benchmarks/results/decode.json, decode_cuda.json on cuda)"
    )
    return parser


def print_table(results: list[dict], ratios: dict, spreads: dict, header: str, rounds: int) -> None:
    print(f"\n{header}\n")
    print("| case | beam | sentences/s | target tokens/s | peak memory (MB) |")
    print("|---|---|---|---|---|")
    for r in results:
        peak = "-" if r["peak_memory_mb"] is None else f"{r['peak_memory_mb']:.0f}"
        print(f"| {r['case']} | {r['beam']} | {r['sentences_per_sec']:.2f} | {r['tokens_per_sec']:.0f} | {peak} |")
    print()
    for k, v in ratios.items():
        per_round = ", ".join(f"{x:.2f}" for x in spreads[k]["per_round"])
        print(f"{k}: {v:.2f}x" + (f"   (per round: {per_round})" if rounds > 1 else ""))


# Each ratio: the first case's sentences/s over the second's, in the same run
RATIOS = {
    "greedy_cached_over_uncached": ("ours_greedy_cached", "ours_greedy_uncached"),
    "beam5_cached_over_uncached": ("ours_beam5_cached", "ours_beam5_uncached"),
    "beam5_over_hf_generate": ("ours_beam5_cached", "hf_beam5"),
    "greedy_over_hf_generate": ("ours_greedy_cached", "hf_greedy"),
    "beam5_over_legacy": ("ours_beam5_cached", "ours_beam5_legacy"),  # issue 47: >= 0.97 on a CPU
    "greedy_over_legacy": ("ours_greedy_cached", "ours_greedy_legacy"),
    "beam5_graphed_over_hf_generate": ("ours_beam5_graphed", "hf_beam5"),  # issue 56: >= 2 on a GPU
    "greedy_graphed_over_hf_generate": ("ours_greedy_graphed", "hf_greedy"),
    "beam5_graphed_over_cached": ("ours_beam5_graphed", "ours_beam5_cached"),
    "greedy_graphed_over_cached": ("ours_greedy_graphed", "ours_greedy_cached"),
    **{
        f"ct2_{search}_{kind}_over_{peer}": (f"ct2_{search}_{kind}", peer_case)
        for search in ("beam5", "greedy")
        for kind in ("int8", "float32")
        for peer, peer_case in (("hf_generate", f"hf_{search}"), ("ours", f"ours_{search}_cached"))
    },
}


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch (install a CUDA build of torch)")
    args.output = args.output or str(
        ROOT / "benchmarks" / "results" / ("decode_cuda.json" if device == "cuda" else "decode.json")
    )
    num = args.sentences or (8 if args.quick else 32)
    repeats = args.repeats or (1 if args.quick else 3)
    threads = args.threads or torch.get_num_threads()
    cases = list(dict.fromkeys(args.cases)) if args.cases else list(CASES)  # in the order given, as train.py
    by = run_rounds(
        cases,
        run_case,
        (num, args.out_len, repeats, threads, device, args.size, args.max_tokens, args.profile),
        args.rounds,
        "sentences_per_sec",
        "sent/s",
    )
    results = [by[c] for c in cases if c in by]
    spreads = {
        name: ratio_spread(by, a, b, "sentences_per_sec") for name, (a, b) in RATIOS.items() if a in by and b in by
    }
    ratios = {name: sp["ratio"] for name, sp in spreads.items()}
    batching = (
        f"{results[0]['batches']} token-budget batches"
        if args.max_tokens and results
        else "token-budget batches"
        if args.max_tokens
        else "one batch"
    )
    print_table(
        results,
        ratios,
        spreads,
        f"Decoding {num} sentences ({batching}), {args.out_len} output tokens each, {device} ({threads} threads)",
        args.rounds,
    )
    settings = {
        "cases": cases,
        "sentences": num,
        "max_tokens": args.max_tokens,
        "out_len": args.out_len,
        "repeats": repeats,
        "rounds": args.rounds,
        "threads": threads,
        "quick": args.quick,
        "size": args.size,
        **MODEL_SIZES[args.size],
        **environment(device),
    }
    return write_results(args.output, settings, results, ratios, spreads, requested=cases)


if __name__ == "__main__":
    raise SystemExit(main())
