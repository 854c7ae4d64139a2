"""The README's GPU figures, written from the files `benchmarks/gpu_check.sh` leaves in benchmarks/results/.

`make readme` renders `gpu_figures()` into the README's block generated from this file
(tools/readme_results.py), so a GPU session copies the files its run brought back into
benchmarks/results/ and the README follows; nothing there is typed by hand. A file not measured yet
is named as such.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
TRAIN = ("train_cuda_32k.json", "train_cuda.json")  # the newest check's file first
DECODE = "decode_cuda_testset.json"
CEILING = "ceiling_cuda.json"
EQUALITY = "graph_equality_cuda.json"


def _read(name: str, root: Path) -> dict | None:
    path = root / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _speed(data: dict, case: str, key: str) -> float | None:
    return next((r[key] for r in data["results"] if r["case"] == case), None)


def _ratio(data: dict, ratio: str, peer: str, bold: bool = False) -> str:
    """`1.23× <peer>` and its rounds, or "<peer>: not measured" (a benchmark stopped by its limit
    keeps what its finished cases measured)."""
    if ratio not in data:
        return f"against {peer} not measured"
    value = f"{data[ratio]:.2f}×"
    return f"{f'**{value}**' if bold else value} {peer}{_rounds(data, ratio)}"


def _rounds(data: dict, ratio: str) -> str:
    per_round = data.get("ratios_per_round", {}).get(ratio, [])
    return f" (per round {', '.join(f'{x:.2f}' for x in per_round)})" if len(per_round) > 1 else " (one round)"


def _where(data: dict, name: str) -> str:
    s = data["settings"]
    return f"{s['device_name']}, torch {s['torch']}, [`{name}`](benchmarks/results/{name})"


def training_line(root: Path) -> str:
    name = next((n for n in TRAIN if (root / n).is_file()), None)
    if name is None:
        return "- training: not measured on a GPU yet (`benchmarks/gpu_check.sh train`)"
    data = _read(name, root)
    tokens = data["settings"]["max_tokens"]
    line = f"- training, {tokens:,}-token batches, bf16 ({_where(data, name)}):"
    graphed = _speed(data, "ours_sinusoidal_cudagraphs", "tokens_per_sec")
    if graphed is not None:
        ratio = _ratio(data, "cudagraphs_ratio_vs_marian", "Marian", bold=True)
        line += f" `training.cuda_graphs` {graphed:,.0f} target tokens/s, {ratio}"
        if "cudagraphs_fraction_of_matmul_peak" in data:
            line += (
                f", {data['cudagraphs_fraction_of_matmul_peak']:.1%} of the measured bf16 matmul peak"
                f" ({data['matmul_peak_gflops'] / 1e3:,.0f} TFLOP/s)"
            )
        line += ";"
    return line + f" eager {_ratio(data, 'ratio_vs_marian', 'Marian')}"


def decoding_line(root: Path) -> str:
    data = _read(DECODE, root)
    if data is None:
        return "- decoding: not measured on a GPU yet (`benchmarks/gpu_check.sh decode`)"
    s = data["settings"]
    eager = _speed(data, "ours_beam5_cached", "sentences_per_sec")
    line = (
        f"- test-set beam-5 decoding, {s['sentences']:,} sentences in {s['max_tokens']:,}-token batches"
        f" ({_where(data, DECODE)}): the eager step"
        + (f" {eager:.0f} sentences/s," if eager is not None else "")
        + f" {_ratio(data, 'beam5_over_hf_generate', 'Marian `generate()`')}"
    )
    if "ours_beam5_graphed" in s.get("cases", []) or "beam5_graphed_over_hf_generate" in data:
        line += f"; `decoding.cuda_graphs` {_ratio(data, 'beam5_graphed_over_hf_generate', 'Marian', bold=True)}"
    return line


def graphs_line(root: Path) -> str:
    equality, ceiling = _read(EQUALITY, root), _read(CEILING, root)
    parts = []
    if equality is not None:
        row = equality["runs"][0]
        parts.append(
            f"`decoding.cuda_graphs` finds the eager step's hypothesis on {row['beam4_identical']:.1%} (beam 4) and"
            f" {row['greedy_identical']:.1%} (greedy) of a trained demo model's {row['lines']:,} test lines"
            f" ([`{EQUALITY}`](benchmarks/results/{EQUALITY}))"
        )
    if ceiling is not None:
        parts.append(
            f"the {ceiling['settings']['tokens']:,}-token step's kernels allow at most"
            f" {ceiling['ceiling_fraction']:.0%} of the bf16 peak (GEMMs alone {ceiling['gemm_fraction']:.0%},"
            f" with attention {ceiling['gemm_attention_fraction']:.0%}; [`{CEILING}`](benchmarks/results/{CEILING}))"
        )
    return "- " + "; ".join(parts) if parts else "- graph equality and the step's ceiling: not measured on a GPU yet"


def gpu_figures(root: Path = RESULTS) -> str:
    """The README's GPU bullets (see the module docstring)."""
    return "\n".join((training_line(root), decoding_line(root), graphs_line(root)))
