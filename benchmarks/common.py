"""Shared by the benchmark scripts: run each case in its own process, over several rounds.

Timings of one process on a shared 2-core machine vary by 10-15% from process to process, so
a case is run once per round in a fresh process, the case order alternating between rounds
(forward, reversed, ...) so that slow drifts hit every case alike; a case's figure is the
median over rounds, and each ratio is also reported per round (its spread shows the noise).
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import platform
import signal
import statistics
import time
from pathlib import Path
from typing import Callable

# Model sizes of the benchmark models. "report" is the original report's 6-layer model (the
# figures in the README); "tiny" exists so that the test suite can run the scripts end to end.
MODEL_SIZES = {
    "report": dict(d_model=512, num_heads=8, layers=6, ffn_dim=2048, vocab=8000),
    "tiny": dict(d_model=32, num_heads=2, layers=1, ffn_dim=64, vocab=500),
}
SIZE_HELP = (
    "model sizes: report = 6+6 layers, d_model 512, 8 heads, FFN 2048, 8k vocabulary (the README's figures); "
    "tiny = a 1+1-layer d_model 32 model, only to check that the script runs"
)


def add_rounds_flag(parser) -> None:
    """--rounds, as run_rounds takes it."""
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every case this many times, each in a fresh process, order alternating; "
        "figures are medians over rounds (default 1)",
    )


def run_rounds(cases: list[str], target: Callable, args: tuple, rounds: int, key: str, unit: str) -> dict[str, dict]:
    """`target(case, *args, queue)` puts one result dict; returns per case the median-`key` result
    (the round whose `key` is the median, plus `rounds_<key>`: every round's value). A case whose
    process ends without a result is reported and left out. SIGTERM (a time limit's `timeout`) or
    Ctrl-C stops the case running and returns what the finished cases measured, so that the
    caller still writes them."""
    ctx = mp.get_context("spawn")
    per_case: dict[str, list[dict]] = {c: [] for c in cases}
    previous = signal.signal(signal.SIGTERM, _interrupt)
    proc = None
    try:
        for r in range(rounds):
            order = cases if r % 2 == 0 else cases[::-1]
            for case in order:
                queue = ctx.Queue()
                proc = ctx.Process(target=target, args=(case, *args, queue))
                proc.start()
                result = _result_of(proc, queue)
                proc.join()
                if result is None:  # the case crashed (its traceback is above): the others still run
                    print(f"  round {r + 1}/{rounds}  {case:22s} FAILED (exit code {proc.exitcode})", flush=True)
                    continue
                per_case[case].append(result)
                print(f"  round {r + 1}/{rounds}  {case:22s} {result[key]:9.2f} {unit}", flush=True)
        complete = rounds
    except KeyboardInterrupt:
        if proc is not None and proc.is_alive():
            proc.terminate()
            proc.join()
        print("  stopped: the cases measured so far are kept, the rest are left out", flush=True)
        complete = 1  # a stopped run keeps every case with at least one round
    finally:
        signal.signal(signal.SIGTERM, previous)
    out = {}
    for case, results in per_case.items():
        if len(results) < complete:  # a case that failed in any round is left out
            continue
        values = [res[key] for res in results]
        median = statistics.median_low(values)
        out[case] = {**results[values.index(median)], f"rounds_{key}": values}
    return out


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _result_of(proc, queue):
    """The case's result, or None once its process has ended without one."""
    import queue as queues

    while True:
        try:
            return queue.get(timeout=2)
        except queues.Empty:
            if not proc.is_alive():  # a result sent just before the exit may still be in the pipe
                try:
                    return queue.get(timeout=1)
                except queues.Empty:
                    return None


def ratio_spread(by: dict[str, dict], num: str, den: str, key: str) -> dict:
    """Median-over-median ratio and the per-round ratios of two cases."""
    per_round = [a / b for a, b in zip(by[num][f"rounds_{key}"], by[den][f"rounds_{key}"])]
    return {"ratio": by[num][key] / by[den][key], "per_round": per_round}


def environment(device: str) -> dict:
    """Versions and hardware that a result depends on (stored with every results file)."""
    import torch
    import transformers

    return {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "machine": platform.processor() or platform.machine(),
    }


def write_results(
    path, settings: dict, results: list[dict], summary: dict, spreads: dict, requested: list[str] | None = None
) -> int:
    """The JSON results file: settings (+ environment), per-case results, headline figures and
    the per-round ratios behind them. With `requested` (the cases asked for), the ones that gave
    no result are listed as `failed_cases`; returns the exit code (1 if any failed)."""
    failed = [c for c in requested or [] if c not in {r["case"] for r in results}]
    if requested is not None:
        settings = {**settings, "failed_cases": failed}
    from utils.files import atomic_write_text

    out = Path(path)
    payload = {
        "settings": settings,
        "results": results,
        **summary,
        "ratios_per_round": {k: sp["per_round"] for k, sp in spreads.items()},
    }
    atomic_write_text(out, json.dumps(payload, indent=2) + "\n")  # a stopped run leaves the last file whole
    print(f"\nwrote {out}")
    if failed:
        print(f"failed: {', '.join(failed)} (their tracebacks are above)")
    return 1 if failed else 0


def matmul_peak(threads: int, device: str, precision: str, repeats: int = 5) -> float:
    """FLOP/s of the best of `repeats` large square matmuls in the benchmark's precision."""
    import torch

    torch.set_num_threads(threads)
    n = 8192 if device == "cuda" else 2048
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    best = math.inf
    for _ in range(repeats + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def write_profile(step, batches: list, device: str, path: Path) -> None:
    """torch.profiler over `step(batch)` for `batches` (already warm): the 40 busiest operators, by
    device time on a GPU (by CPU time on a CPU), and the host's and the device's total time per step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from utils.files import atomic_write_text

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for batch in batches:
            step(batch)
        if device == "cuda":
            torch.cuda.synchronize()
    events = prof.key_averages()
    key = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    atomic_write_text(
        path, f"{len(batches)} steps; sorted by {key}\n\n" + events.table(sort_by=key, row_limit=40) + "\n"
    )
    print(f"wrote {path}", flush=True)
