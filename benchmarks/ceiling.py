#!/usr/bin/env python
"""The training step's ceiling: what fraction of the device's matmul peak the model's own shapes allow.

A training step of the report model at a token budget is, besides elementwise work, a fixed set of
matrix products (each linear layer forward, and its two backward products: input and weight
gradients) and attention calls (encoder self, decoder causal self, cross; forward and backward).
This times each of them alone at the step's shapes — `tokens` rows, sentences of `length` tokens
— and the memory-bound work: the residual / dropout / layer-norm pass of every sub-layer, the FFN's
activation and dropout, the loss over the vocabulary and the Adam update; and reports:

  gemm_fraction              the GEMMs' FLOPs over their time, as a fraction of the matmul peak
  gemm_attention_fraction    GEMMs and attention together
  ceiling_fraction           the same FLOPs over the time of GEMMs, attention and the memory-bound
                             work: an upper bound of what a step built from these kernels reaches
                             (embedding lookups, casts and launches are left out)

The peak is the best of large square matmuls in the same precision (`common.matmul_peak`). Prints a
table and writes benchmarks/results/ceiling.json (ceiling_cuda.json on a GPU).

  python benchmarks/ceiling.py --device cuda --tokens 32000          # the issue's 32k-token step
  python benchmarks/ceiling.py --size tiny --tokens 256 --length 8    # any machine, seconds
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

from common import MODEL_SIZES, SIZE_HELP, environment, matmul_peak, write_results  # noqa: E402


def linear_shapes(tokens: int, sizes: dict) -> list[tuple[str, int, int, int, int]]:
    """(name, rows, in, out, count) of every linear layer's forward product in one step."""
    d, f, v, layers = sizes["d_model"], sizes["ffn_dim"], sizes["vocab"], sizes["layers"]
    return [
        ("qkv", tokens, d, 3 * d, 2 * layers),  # encoder and decoder self-attention
        ("attention out", tokens, d, d, 3 * layers),  # encoder self, decoder self and cross
        ("cross q", tokens, d, d, layers),
        ("cross kv", tokens, d, 2 * d, layers),
        ("ffn up", tokens, d, f, 2 * layers),
        ("ffn down", tokens, f, d, 2 * layers),
        ("output projection", tokens, d, v, 1),
    ]


def timed(fn, device: str, repeats: int) -> float:
    """Median seconds of `fn()` over `repeats` calls after two warm-ups."""
    import torch

    times = []
    for i in range(repeats + 2):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(kind: str, name: str, flops: float, seconds: float) -> dict:
    return {"kind": kind, "name": name, "flops": flops, "seconds": seconds}


def measure(tokens: int, length: int, sizes: dict, device: str, dtype, repeats: int) -> list[dict]:
    """One row per kind of work: its FLOPs in one step and its seconds (time of one call x count)."""
    import torch
    import torch.nn.functional as F

    rows = []
    for name, m, k, n, count in linear_shapes(tokens, sizes):
        x, w, g = (torch.randn(*s, device=device, dtype=dtype) for s in ((m, k), (k, n), (m, n)))
        for part, a, b in (("forward", x, w), ("input grad", g, w.T), ("weight grad", x.T, g)):
            seconds = timed(lambda a=a, b=b: a @ b, device, repeats)
            rows.append(row("gemm", f"{name} {part}", 2 * m * k * n * count, seconds * count))
    heads, d = sizes["num_heads"], sizes["d_model"]
    batch = max(tokens // length, 1)
    layers = sizes["layers"]
    shape = (batch, heads, length, d // heads)
    for name, causal in (("encoder self", False), ("decoder self", True), ("cross", False)):
        q, k, v = (torch.randn(*shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
        grad = torch.randn_like(q)

        def step(q=q, k=k, v=v, grad=grad, causal=causal):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(grad)

        pairs = length * length / (2 if causal else 1)
        flops = 4 * batch * heads * pairs * (d // heads) * 3.5  # forward, and backward at 2.5x
        rows.append(row("attention", f"{name} (fwd+bwd)", flops * layers, timed(step, device, repeats) * layers))
    x = torch.randn(tokens, d, device=device, dtype=dtype, requires_grad=True)
    y = torch.randn(tokens, d, device=device, dtype=dtype, requires_grad=True)
    weight = torch.ones(d, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(tokens, d, device=device, dtype=dtype)

    def sublayer_tail():
        F.layer_norm(x + F.dropout(y, 0.1), (d,), weight).backward(grad)

    sublayers = 2 * layers + 3 * layers  # encoder: attention, FFN; decoder: self, cross, FFN
    seconds = timed(sublayer_tail, device, repeats) * sublayers
    rows.append(row("elementwise", "residual + dropout + layer norm (fwd+bwd)", 0, seconds))
    f, v = sizes["ffn_dim"], sizes["vocab"]
    hidden = torch.randn(tokens, f, device=device, dtype=dtype, requires_grad=True)
    hidden_grad = torch.randn_like(hidden)
    seconds = timed(lambda: F.dropout(F.relu(hidden), 0.1).backward(hidden_grad), device, repeats) * 2 * layers
    rows.append(row("elementwise", "FFN activation + dropout (fwd+bwd)", 0, seconds))
    logits = torch.randn(tokens, v, device=device, dtype=dtype, requires_grad=True)
    target = torch.randint(0, v, (tokens,), device=device)
    seconds = timed(lambda: F.cross_entropy(logits.float(), target, label_smoothing=0.1).backward(), device, repeats)
    rows.append(row("elementwise", "loss: log-softmax + cross-entropy over the vocabulary (fwd+bwd)", 0, seconds))
    weights = sum(k * n * count for _, _, k, n, count in linear_shapes(1, sizes)) + v * d  # + the embedding
    param = torch.zeros(weights, device=device, requires_grad=True)
    param.grad = torch.randn_like(param)
    adam = torch.optim.Adam([param], lr=1e-4, fused=device == "cuda")
    rows.append(row("elementwise", "Adam update of every weight", 0, timed(adam.step, device, repeats)))
    return rows


def fractions(rows: list[dict], peak: float) -> dict:
    """The three ceilings of the module docstring."""

    def total(kinds, key):
        return sum(r[key] for r in rows if r["kind"] in kinds)

    gemm = ("gemm",)
    both = ("gemm", "attention")
    every = ("gemm", "attention", "elementwise")
    return {
        "matmul_peak_tflops": peak / 1e12,
        "step_tflop": total(both, "flops") / 1e12,
        "gemm_fraction": total(gemm, "flops") / total(gemm, "seconds") / peak,
        "gemm_attention_fraction": total(both, "flops") / total(both, "seconds") / peak,
        "ceiling_fraction": total(both, "flops") / total(every, "seconds") / peak,
        "ceiling_step_seconds": total(every, "seconds"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("bf16", "fp32"), help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--tokens", type=int, default=32000, help="tokens per side of the step's batch")
    parser.add_argument("--length", type=int, default=32, help="tokens per sentence (sets the batch size)")
    parser.add_argument("--size", choices=sorted(MODEL_SIZES), default="report", help=SIZE_HELP)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per kernel (median)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--output", help="default: benchmarks/results/ceiling.json (ceiling_cuda.json on cuda)")
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    precision = args.precision or ("bf16" if args.device == "cuda" else "fp32")
    threads = args.threads or torch.get_num_threads()
    peak = matmul_peak(threads, args.device, precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    sizes = MODEL_SIZES[args.size]
    rows = measure(args.tokens, args.length, sizes, args.device, dtype, args.repeats)
    summary = fractions(rows, peak)
    print(f"Training-step ceiling: {args.tokens} tokens, {args.length}-token sentences, {args.device} {precision}\n")
    print("| work | TFLOP | ms | TFLOP/s | of peak |")
    print("|---|---|---|---|---|")
    for r in rows:
        rate = r["flops"] / r["seconds"] / 1e12 if r["flops"] else 0.0
        cells = (
            r["name"],
            f"{r['flops'] / 1e12:.3f}",
            f"{r['seconds'] * 1e3:.2f}",
            f"{rate:.1f}",
            f"{rate * 1e12 / peak:.0%}",
        )
        print("| " + " | ".join(cells) + " |")
    print()
    for key, value in summary.items():
        print(f"{key}: {value:.3f}")
    settings = dict(tokens=args.tokens, length=args.length, precision=precision, size=args.size)
    settings.update(repeats=args.repeats, threads=threads, **sizes, **environment(args.device))
    output = args.output or str(
        ROOT / "benchmarks" / "results" / ("ceiling_cuda.json" if args.device == "cuda" else "ceiling.json")
    )
    return write_results(output, settings, rows, summary, {})


if __name__ == "__main__":
    raise SystemExit(main())
