#!/usr/bin/env python
"""Training-step throughput and memory: this project's model vs Hugging Face Marian vs nn.Transformer.

Every contender has the same sizes (6+6 layers, d_model 512, 8 heads, FFN 2048, the same
vocabulary) and trains on the same random batches: token-budget batches (length-bucketed, as
train.py builds them) whose sentence lengths follow the shipped corpus (subword lengths
approximated as 1.3 x whitespace words). A step is forward, token cross-entropy, backward and
an Adam update. Each case runs in a fresh process (its own peak memory). Dropout is placed alike:
p = 0.1 on embeddings, on each sub-layer output and inside the feed-forward block, none on
attention weights (ours: model defaults; Marian: dropout = activation_dropout = 0.1,
attention_dropout = 0); nn.Transformer cannot switch off its attention-weight dropout, so it
does a little more work.

This project's step is train.py's own (training/engine.py through create_trainer, with its fused
Adam); the peers' is forward, loss, backward, Adam. Every contender's host syncs per step (reads
of a device value into Python, which stop the host until a GPU catches up) are counted on one
untimed step with a TorchDispatchMode (benchmarks/host_syncs.py); `host_syncs_per_step` is ours.
On a CPU the peers' counts are mostly their (unfused) Adam reading its per-parameter step counters,
which on a GPU stay on the host and do not wait for it.

Also measured: the machine's dense matmul peak (FLOP/s of a large fp32 matmul) and the FLOPs of
one training step of this project's model (torch.utils.flop_counter), giving the achieved
fraction of that peak. Prints a table and writes benchmarks/results/train.json with
`ratio_vs_marian`, `ratio_vs_nn_transformer` and `fraction_of_matmul_peak`.

Also run, by default on a GPU (`--cases` on a CPU): `ours_legacy`, the step as it was before its
host syncs were removed; `ours_sinusoidal_compiled` (training.compile) and
`ours_sinusoidal_cudagraphs` (training.cuda_graphs, batches cut and padded to multiples of 16 as
training.pad_to_multiple does; its warm-up passes twice over the timed batches, since a new shape
is recorded on its second call). Warm-up (compilation, graph recording) is timed apart from the
steady state. `ours_sinusoidal_packed` (training.pack_length 128: the same corpus-like pairs, in
shuffled order, several per row of 128 tokens, attending within each pair) runs everywhere; its
batches hold the same pair lengths, grouped into rows instead of by length.

  python benchmarks/train.py           # 3,000-token batches, 8 timed steps per case
  python benchmarks/train.py --quick   # under 2 minutes on 2 CPU cores: 1,000-token batches, 3 steps
  python benchmarks/train.py --rounds 3  # every case in 3 fresh processes, medians (timings vary ~10%)
  python benchmarks/train.py --device cuda --precision bf16 --max_tokens 16000 --steps 30
      # on a GPU: bf16 autocast, peak memory from torch.cuda, results in train_cuda.json
"""

from __future__ import annotations

import argparse
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
    matmul_peak,
    ratio_spread,
    run_rounds,
    write_profile,
    write_results,
)
from train_contenders import PAD, build, harness_step, legacy_step, make_batches  # noqa: E402

CASES = [
    "ours_sinusoidal",
    "ours_rope",
    "hf_marian",
    "nn_transformer",
    "ours_legacy",
    "ours_sinusoidal_compiled",
    "ours_sinusoidal_cudagraphs",
    "ours_sinusoidal_packed",
]
GRAPH_MULTIPLE = 16  # training.pad_to_multiple of the CUDA-graph case
PACK_LENGTH = 128  # training.pack_length of the packed case (the demo's data.max_len + 1 rounded)
RATIOS = {  # summary ratio: (numerator case, denominator case), target tokens/s
    "ratio_vs_marian": ("ours_sinusoidal", "hf_marian"),
    "ratio_vs_nn_transformer": ("ours_sinusoidal", "nn_transformer"),
    "rope_ratio_vs_marian": ("ours_rope", "hf_marian"),
    "ratio_vs_legacy_engine": ("ours_sinusoidal", "ours_legacy"),
    "compiled_ratio_vs_marian": ("ours_sinusoidal_compiled", "hf_marian"),
    "compiled_ratio_vs_nn_transformer": ("ours_sinusoidal_compiled", "nn_transformer"),
    "compiled_ratio_vs_legacy_engine": ("ours_sinusoidal_compiled", "ours_legacy"),
    "compiled_over_eager": ("ours_sinusoidal_compiled", "ours_sinusoidal"),
    "cudagraphs_ratio_vs_marian": ("ours_sinusoidal_cudagraphs", "hf_marian"),
    "cudagraphs_ratio_vs_legacy_engine": ("ours_sinusoidal_cudagraphs", "ours_legacy"),
    "cudagraphs_over_eager": ("ours_sinusoidal_cudagraphs", "ours_sinusoidal"),
    "packed_ratio_vs_marian": ("ours_sinusoidal_packed", "hf_marian"),
    "packed_over_eager": ("ours_sinusoidal_packed", "ours_sinusoidal"),
}


def run_case(
    case: str,
    max_tokens: int,
    steps: int,
    threads: int,
    device: str,
    precision: str,
    size: str,
    profile_dir: str | None,
    queue,
) -> None:
    import torch

    torch.set_num_threads(threads)
    if device == "cuda":  # as train.py does, for every contender alike (all three attend through SDPA)
        from utils.runtime import skip_cudnn_attention

        skip_cudnn_attention()
    sizes = MODEL_SIZES[size]
    graphs = case.endswith("_cudagraphs")  # trains as training.cuda_graphs with pad_to_multiple 16 would
    multiple, pack = (GRAPH_MULTIPLE if graphs else 1), (PACK_LENGTH if case.endswith("_packed") else 0)
    host_batches = make_batches(max_tokens, steps + 3, sizes["vocab"], multiple=multiple, pack=pack)
    batches = [tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in b) for b in host_batches]
    target_tokens = [int(b[2].ne(PAD).sum()) for b in host_batches]  # counted on the host, once
    model, step_loss = build(case, sizes, device)
    model.train()

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    step = make_step(case, model, step_loss, device, precision, dict(zip(map(id, batches), target_tokens)), graphs)
    warmup = 3 if device == "cuda" or compiled_case(case) else 1
    warmup_seconds, times, tokens = time_steps(step, case, batches, target_tokens, warmup, steps, graphs, sync)
    if profile_dir:  # where a step's time goes: untimed steps under torch.profiler, the busiest ops
        write_profile(step, batches[warmup : warmup + min(steps, 5)], device, Path(profile_dir) / f"profile_{case}.txt")
    flops, syncs = step_counts(step, case, batches, target_tokens, sync)
    total = sum(times)
    queue.put(
        {
            "case": case,
            "params": sum(p.numel() for p in model.parameters()),
            "steps": steps,
            "host_syncs_per_step": syncs and syncs.count,
            "host_syncs_at": syncs and sorted(set(syncs.where)),
            "warmup_seconds": warmup_seconds,
            "target_tokens": tokens,
            "seconds": total,
            "median_step_seconds": statistics.median(times),
            "tokens_per_sec": tokens / total,
            "flops_per_target_token": flops,
            "peak_mb": (
                torch.cuda.max_memory_allocated() / 2**20
                if device == "cuda"
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            ),
            "memory_kind": "cuda_max_allocated" if device == "cuda" else "process_max_rss",
        }
    )


def make_step(case: str, model, step_loss, device: str, precision: str, tokens_by_batch: dict, graphs: bool):
    """One training step of `case` on a batch: the harness's own engine (ours_*), the engine as it was
    (ours_legacy), or a plain Adam step of a contender."""
    import torch

    if case == "ours_legacy":  # the engine as it was when issue 33 opened, on today's model
        return legacy_step(model, device, precision)
    if case.startswith("ours"):  # train.py's own step (training/engine.py), its optimizer and its logging sums
        return harness_step(model, device, precision, tokens_by_batch, compiled_case(case), graphs)
    dtype = {"fp32": None, "bf16": torch.bfloat16}[precision]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step(batch) -> None:
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = step_loss(*batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def time_steps(
    step, case: str, batches: list, target_tokens: list, warmup: int, steps: int, graphs: bool, sync
) -> tuple[float, list[float], int]:
    """(warm-up seconds, the timed steps' seconds, their target tokens).

    Warm-up: allocations, kernels, cuBLAS heuristics on a GPU; compilation (one graph with dynamic
    shapes) -- timed apart from the steady state. Compiled: the warm-up also passes over the timed
    batches, as a long run's first epoch meets its few graph variants (an unaligned length is one
    more). CUDA graphs: twice, since Inductor's graph trees run a new shape once eagerly and record
    it on its second call."""
    import torch

    passes = 2 if graphs else 1 if compiled_case(case) else 0
    start = time.perf_counter()
    for batch in batches[:warmup] + batches[warmup : warmup + steps] * passes:
        step(batch)
    sync()
    warmup_seconds = time.perf_counter() - start
    if batches and batches[0][0].is_cuda:  # the peak of the timed steps, not of the warm-up
        torch.cuda.reset_peak_memory_stats()
    times, tokens = [], 0
    for batch, n in zip(batches[warmup : warmup + steps], target_tokens[warmup : warmup + steps]):
        start = time.perf_counter()
        step(batch)
        sync()
        times.append(time.perf_counter() - start)
        tokens += n
    return warmup_seconds, times, tokens


def step_counts(step, case: str, batches: list, target_tokens: list, sync) -> tuple:
    """(FLOPs per target token of ours_sinusoidal, the host syncs of an eager step), on untimed steps."""
    flops = None
    if case == "ours_sinusoidal":
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            step(batches[1])
        flops = counter.get_total_flops() / target_tokens[1]  # per target token
    syncs = None
    if not compiled_case(case):  # (a compiled step runs the same engine code around the model)
        from host_syncs import CountHostSyncs

        with CountHostSyncs() as syncs:  # an untimed step: the dispatch mode slows every operation
            step(batches[2])
        sync()
    return flops, syncs


def compiled_case(case: str) -> bool:
    return case.endswith(("_compiled", "_cudagraphs"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small version (< 2 min on 2 CPU cores)")
    parser.add_argument("--max_tokens", type=int, help="token budget per batch (default 3000, quick 1000)")
    parser.add_argument("--steps", type=int, help="timed steps per case (default 8, quick 3)")
    add_rounds_flag(parser)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--device", default="cpu", choices=["cpu", "cuda"], help="cpu (default, the figures in the README) or cuda"
    )
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16"],
        help="fp32, or bf16 autocast as training.precision: bf16 does",
    )
    parser.add_argument("--size", default="report", choices=sorted(MODEL_SIZES), help=SIZE_HELP)
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=CASES,
        metavar="CASE",
        help=f"run only these cases, in this order, of {', '.join(CASES)} (default: all but the compiled "
        "ones on a CPU, where compilation takes minutes; --quick: the first four). "
        "ours_legacy is the training step as it was when issue 33 opened; "
        "ours_sinusoidal_compiled is train.py's step with training.compile: true, "
        "ours_sinusoidal_cudagraphs with training.cuda_graphs: true and pad_to_multiple 16",
    )
    parser.add_argument(
        "--output", default=None, help="JSON file (default benchmarks/results/train.json, train_cuda.json on cuda)"
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="also profile up to 5 untimed steps of each case after its timed ones "
        "(torch.profiler) and write the busiest operators to DIR/profile_<case>.txt",
    )
    return parser


def summarise(by: dict, peak: float) -> tuple[dict, dict]:
    """(summary figures: achieved FLOP/s and the fraction of the matmul peak per ours_* case, host
    syncs, the ratios; the ratios' spread over rounds)."""
    summary = {"matmul_peak_gflops": peak / 1e9}
    flops = by.get("ours_sinusoidal", {}).get("flops_per_target_token")  # the same model in every ours_* case
    for case, prefix in (
        ("ours_sinusoidal", ""),
        ("ours_sinusoidal_compiled", "compiled_"),
        ("ours_sinusoidal_cudagraphs", "cudagraphs_"),
        ("ours_legacy", "legacy_"),
    ):
        if case in by and flops:
            summary[f"{prefix}achieved_gflops"] = flops * by[case]["tokens_per_sec"] / 1e9
            summary[f"{prefix}fraction_of_matmul_peak"] = flops * by[case]["tokens_per_sec"] / peak
    if "ours_sinusoidal" in by:
        summary["host_syncs_per_step"] = by["ours_sinusoidal"]["host_syncs_per_step"]
    spreads = {name: ratio_spread(by, a, b, "tokens_per_sec") for name, (a, b) in RATIOS.items() if a in by and b in by}
    summary.update({name: sp["ratio"] for name, sp in spreads.items()})
    return summary, spreads


def print_results(results: list[dict], summary: dict, spreads: dict, heading: str, device: str, rounds: int) -> None:
    print(heading)
    memory = "peak CUDA memory (MB)" if device == "cuda" else "peak RSS (MB)"
    print(f"| model | params | target tokens/s | median step (s) | warm-up (s) | {memory} | host syncs per step |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['case']} | {r['params'] / 1e6:.1f}M | {r['tokens_per_sec']:.0f} | "
            f"{r['median_step_seconds']:.3f} | {r['warmup_seconds']:.1f} | {r['peak_mb']:.0f} | "
            f"{'-' if r['host_syncs_per_step'] is None else r['host_syncs_per_step']} |"
        )
    print()
    for k, v in summary.items():
        per_round = ", ".join(f"{x:.3f}" for x in spreads[k]["per_round"]) if k in spreads else ""
        print(f"{k}: {v:.3f}" + (f"   (per round: {per_round})" if per_round and rounds > 1 else ""))


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch (install a CUDA build of torch)")
    args.output = args.output or str(
        ROOT / "benchmarks" / "results" / ("train_cuda.json" if args.device == "cuda" else "train.json")
    )
    max_tokens = args.max_tokens or (1000 if args.quick else 3000)
    steps = args.steps or (3 if args.quick else 8)
    threads = args.threads or torch.get_num_threads()
    # --cases runs in the order given (a time-limited GPU check puts first what it needs most)
    cases = (
        list(dict.fromkeys(args.cases))
        if args.cases
        else [c for c in CASES[: 4 if args.quick else None] if args.device == "cuda" or not compiled_case(c)]
    )
    by = run_rounds(
        cases,
        run_case,
        (max_tokens, steps, threads, args.device, args.precision, args.size, args.profile),
        args.rounds,
        "tokens_per_sec",
        "target tokens/s",
    )
    results = [by[c] for c in cases if c in by]
    summary, spreads = summarise(by, matmul_peak(threads, args.device, args.precision))
    where = "cuda" if args.device == "cuda" else f"cpu, {threads} threads"
    print_results(
        results,
        summary,
        spreads,
        f"\nTraining steps, {max_tokens}-token batches, {steps} timed steps, {args.precision}, {where}\n",
        args.device,
        args.rounds,
    )
    settings = {
        "cases": cases,
        "max_tokens": max_tokens,
        "steps": steps,
        "rounds": args.rounds,
        "threads": threads,
        "quick": args.quick,
        "precision": args.precision,
        "size": args.size,
        **MODEL_SIZES[args.size],
        **environment(args.device),
    }
    return write_results(args.output, settings, results, summary, spreads, requested=cases)


if __name__ == "__main__":
    raise SystemExit(main())
