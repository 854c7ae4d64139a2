"""Attention of one decoding step on CPU: the C kernel vs batched matmuls vs PyTorch's SDPA.

The shapes of a beam search step: every sentence's beams folded into the query axis (5 queries
per sentence and head) against the sentence's cached keys (beams x positions, each beam seeing
its ancestors only through a -inf / bias mask), and cross-attention of the same queries over a
padded source. Each contender computes the same attention (checked before timing); keys and
values cycle through `--layers` sets so that, as in a decoder, they come from memory rather than
cache. For the self-attention shapes the kernel also runs in its beam-search form, each beam
reading only its ancestors' keys through an index (`indexed`; what a search step uses), with the
ancestors drawn at random: every beam of a sentence descends from a different slot more often
than in a real search, where the beams soon share their history, so this is its worst case.
Prints a table and writes benchmarks/results/attention.json with `kernel_over_matmul`,
`kernel_over_sdpa` and `indexed_over_kernel` (speed ratios) per shape.

  python benchmarks/attention.py            # 32 sentences x 5 beams x 8 heads of 64, 3-50 positions
  python benchmarks/attention.py --quick    # fewer repeats (seconds)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import environment, write_results  # noqa: E402

from decoding import cpu_kernel  # noqa: E402
from decoding.attend import attend  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer repeats (a few seconds)")
    p.add_argument("--sentences", type=int, default=32, help="sentences per step (default 32)")
    p.add_argument("--beams", type=int, default=5, help="queries per sentence and head (default 5)")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head_dim", type=int, default=64)
    p.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=[3, 10, 25, 50],
        help="decoded positions per beam for the self-attention shapes (default 3 10 25 50)",
    )
    p.add_argument("--src_len", type=int, default=30, help="padded source length for the cross-attention shape")
    p.add_argument("--layers", type=int, default=6, help="key/value sets cycled through (default 6)")
    p.add_argument("--repeats", type=int, default=None, help="timed passes over the layers (default 20, quick 3)")
    p.add_argument("--threads", type=int, default=2, help="torch / kernel threads (default 2)")
    p.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "attention.json"))
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 20
    if (
        min(args.sentences, args.beams, args.heads, args.head_dim, args.layers, args.repeats, args.src_len) < 1
        or min(args.lengths) < 1
    ):
        p.error("sizes, lengths and repeats must be positive")
    return args


def make_shape(args, kind: str, length: int, seed: int):
    """Per layer (q, k, v), the step's mask as the decoder hands them to `attend`, and for self-attention
    the ancestor index that replaces the mask in a search step (`DecoderCache.ancestor_keys`; None for cross)."""
    g = torch.Generator().manual_seed(seed)
    s, b, h, d = args.sentences, args.beams, args.heads, args.head_dim
    if kind == "self":
        keys = b * length
        # each beam sees one slot per position: its ancestor's (random here), position-major, slot-minor
        ancestor = torch.randint(0, b, (s, b, length), generator=g)
        allowed = F.one_hot(ancestor, b).bool().reshape(s, 1, b, keys)
        mask = torch.zeros(s, h, b, keys).masked_fill_(~allowed, float("-inf"))
        index = (ancestor + torch.arange(length) * b).to(torch.int32)  # [s, b, length]
    else:
        index = None
        keys = length
        lengths = torch.randint(max(1, keys // 2), keys + 1, (s,), generator=g)
        allowed = torch.arange(keys)[None, :] < lengths[:, None]
        mask = torch.zeros(s, h, 1, keys).masked_fill_(~allowed[:, None, None, :], float("-inf"))
    layers = [tuple(torch.randn(s, h, n, d, generator=g) for n in (b, keys, keys)) for _ in range(args.layers)]
    return layers, mask, index


def time_contender(fn, layers, mask, index, repeats: int) -> float:
    """Median over repeats of the mean microseconds per call (one pass over all layers)."""
    for q, k, v in layers:
        fn(q, k, v, mask, index)
    passes = []
    for _ in range(repeats):
        start = time.perf_counter()
        for q, k, v in layers:
            fn(q, k, v, mask, index)
        passes.append((time.perf_counter() - start) / len(layers) * 1e6)
    return statistics.median(passes)


def contenders(head_dim: int, kernel_ok: bool) -> dict:
    """The attention implementations timed, by name: each `fn(q, k, v, mask, index)`."""
    scale = head_dim**-0.5

    def kernel(q, k, v, mask, index):
        return cpu_kernel.attention(q, k, v, mask, scale)

    def indexed(q, k, v, mask, index):  # the mask only hides non-ancestors: the index replaces it
        return cpu_kernel.attention(q, k, v, None, scale, index)

    def matmul(q, k, v, mask, index):
        lib = cpu_kernel._state.get("lib")
        cpu_kernel._state["lib"] = None  # attend's batched-matmul path
        try:
            return attend(q, k, v, mask, False, 0.0)
        finally:
            cpu_kernel._state["lib"] = lib

    def sdpa(q, k, v, mask, index):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    if kernel_ok:
        return {"kernel": kernel, "indexed": indexed, "matmul": matmul, "sdpa": sdpa}
    print(f"the C kernel is not available here ({cpu_kernel.unavailable_reason()}): timing the others only")
    return {"matmul": matmul, "sdpa": sdpa}


def measure(args, runners: dict, kernel_ok: bool) -> list[dict]:
    """One row per shape: each contender's microseconds per layer, its outputs' largest difference
    from SDPA's, and the kernel's speed-ups."""
    shapes = [("self", n) for n in args.lengths] + [("cross", args.src_len)]
    results = []
    with torch.inference_mode():
        for i, (kind, length) in enumerate(shapes):
            layers, mask, index = make_shape(args, kind, length, seed=i)
            q, k, v = layers[0]
            runs = {name: fn for name, fn in runners.items() if name != "indexed" or index is not None}
            outputs = {name: fn(q, k, v, mask, index) for name, fn in runs.items()}
            reference = outputs["sdpa"]
            row = {
                "shape": kind,
                "positions": length,
                "keys": k.size(2),
                "max_abs_diff": max(float((out - reference).abs().max()) for out in outputs.values()),
            }
            for name, fn in runs.items():
                row[f"{name}_us"] = time_contender(fn, layers, mask, index, args.repeats)
            if kernel_ok:
                row["kernel_over_matmul"] = row["matmul_us"] / row["kernel_us"]
                row["kernel_over_sdpa"] = row["sdpa_us"] / row["kernel_us"]
                if "indexed_us" in row:
                    row["indexed_over_kernel"] = row["kernel_us"] / row["indexed_us"]
            results.append(row)
    return results


def print_table(args, names: list[str], results: list[dict], kernel_ok: bool) -> None:
    print(
        f"\nOne decoding step's attention: {args.sentences} sentences x {args.beams} queries x {args.heads} heads "
        f"of {args.head_dim}, cpu ({args.threads} threads), microseconds per layer (median of {args.repeats})\n"
    )
    print(
        "| shape | keys | "
        + " | ".join(f"{n} (us)" for n in names)
        + (" | kernel / matmul | kernel / sdpa | indexed / kernel |" if kernel_ok else " |")
    )
    print("|---|---|" + "---|" * len(names) + ("---|---|---|" if kernel_ok else ""))
    for row in results:
        cells = [f"{row['shape']} ({row['positions']} pos.)", str(row["keys"])]
        cells += [f"{row[f'{n}_us']:.0f}" if f"{n}_us" in row else "-" for n in names]
        if kernel_ok:
            cells += [
                f"{row['kernel_over_matmul']:.2f}x",
                f"{row['kernel_over_sdpa']:.2f}x",
                f"{row['indexed_over_kernel']:.2f}x" if "indexed_over_kernel" in row else "-",
            ]
        print("| " + " | ".join(cells) + " |")


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    kernel_ok = cpu_kernel.available()
    runners = contenders(args.head_dim, kernel_ok)
    results = measure(args, runners, kernel_ok)
    print_table(args, list(runners), results, kernel_ok)
    settings = {k: v for k, v in vars(args).items() if k != "output"}
    settings.update(environment("cpu"))
    settings["kernel"] = kernel_ok
    summary = {
        "kernel_over_matmul": {f"{r['shape']}_{r['positions']}": r.get("kernel_over_matmul") for r in results},
        "kernel_over_sdpa": {f"{r['shape']}_{r['positions']}": r.get("kernel_over_sdpa") for r in results},
        "indexed_over_kernel": {
            f"{r['shape']}_{r['positions']}": r["indexed_over_kernel"] for r in results if "indexed_over_kernel" in r
        },
    }
    write_results(args.output, settings, results, summary, {})


if __name__ == "__main__":
    main()
