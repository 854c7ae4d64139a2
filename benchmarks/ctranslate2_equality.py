#!/usr/bin/env python
"""Same translations? Trained runs decoded by this harness's PyTorch search and through CTranslate2.

For each run: its test split translated by test.py five ways (length penalty avg on both sides,
CTranslate2 has no GNMT penalty), into a temporary folder, without the length protocol or the
teacher-forced diagnostic:

  pytorch greedy     ctranslate2 greedy float32
  pytorch beam 4     ctranslate2 beam 4 float32     ctranslate2 beam 4 int8

and reports per run: the share of test lines whose hypothesis is identical, the sacreBLEU of each and
its difference, and the translation seconds (test.py's own timing). Writes
benchmarks/results/ctranslate2_equality.json and prints a Markdown table.

  python benchmarks/ctranslate2_equality.py runs/demo/sinusoidal runs/demo/learnable runs/demo/rope
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import environment  # noqa: E402

from utils import run_files  # noqa: E402

COMMON = ["evaluation.teacher_forced=false", "evaluation.concat=[]", "decoding.length_penalty=avg"]
WAYS = {
    "pytorch_greedy": ["decoding.strategy=greedy"],
    "ct2_greedy_float32": ["decoding.strategy=greedy", "decoding.backend=ctranslate2", "decoding.compute_type=float32"],
    "pytorch_beam4": ["decoding.strategy=beam", "decoding.beam_size=4"],
    "ct2_beam4_float32": [
        "decoding.strategy=beam",
        "decoding.beam_size=4",
        "decoding.backend=ctranslate2",
        "decoding.compute_type=float32",
    ],
    "ct2_beam4_int8": [
        "decoding.strategy=beam",
        "decoding.beam_size=4",
        "decoding.backend=ctranslate2",
        "decoding.compute_type=int8",
    ],
}
PAIRS = (  # (harness, CTranslate2) compared line by line
    ("pytorch_greedy", "ct2_greedy_float32"),
    ("pytorch_beam4", "ct2_beam4_float32"),
    ("pytorch_beam4", "ct2_beam4_int8"),
)


def decode(run: str, way: str, folder: Path) -> dict:
    """test.py on the run's test split with the way's settings: its scores and hypotheses."""
    from commands.test import run_test
    from commands.test_request import TestRequest

    out = folder / way
    with contextlib.redirect_stdout(io.StringIO()):
        run_test(TestRequest(run=run, overrides=[*COMMON, *WAYS[way]], output=str(out), device="cpu"))
    scores = json.loads((out / run_files.SCORES).read_text(encoding="utf-8"))
    hyps = (out / run_files.HYPOTHESES).read_text(encoding="utf-8").splitlines()
    return {"sacrebleu": scores["sacrebleu"], "seconds": scores["translate_seconds"], "hypotheses": hyps}


def compare_run(run: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="ct2-equality-") as tmp:
        found = {way: decode(run, way, Path(tmp)) for way in WAYS}
    row: dict = {"run": run, "lines": len(found["pytorch_greedy"]["hypotheses"])}
    row.update({f"{way}_sacrebleu": found[way]["sacrebleu"] for way in WAYS})
    row.update({f"{way}_seconds": found[way]["seconds"] for way in WAYS})  # test.py's timing, not a benchmark
    for ours, theirs in PAIRS:
        a, b = found[ours]["hypotheses"], found[theirs]["hypotheses"]
        row[f"{theirs}_identical"] = round(sum(x == y for x, y in zip(a, b)) / len(a), 4)
        row[f"{theirs}_bleu_change"] = round(found[theirs]["sacrebleu"] - found[ours]["sacrebleu"], 2)
    return row


def table(rows: list[dict]) -> str:
    head = (
        "| run | lines | greedy identical | greedy ΔBLEU | beam 4 identical | beam 4 ΔBLEU | int8 beam 4 ΔBLEU "
        "| beam 4 s (pytorch / ct2 / int8) |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['lines']} | {r['ct2_greedy_float32_identical']:.2%} | "
            f"{r['ct2_greedy_float32_bleu_change']:+.2f} | {r['ct2_beam4_float32_identical']:.2%} | "
            f"{r['ct2_beam4_float32_bleu_change']:+.2f} | {r['ct2_beam4_int8_bleu_change']:+.2f} | "
            f"{r['pytorch_beam4_seconds']:.1f} / {r['ct2_beam4_float32_seconds']:.1f} / "
            f"{r['ct2_beam4_int8_seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="trained run folders (their test split is decoded)")
    parser.add_argument(
        "--output", default=str(ROOT / "benchmarks/results/ctranslate2_equality.json"), help="the JSON to write"
    )
    args = parser.parse_args(argv)
    missing = [run for run in args.runs if not (Path(run) / run_files.CONFIG).is_file()]
    if missing:  # before any decoding: a typo must not cost the runs before it
        parser.error(f"not a run folder (no config.yaml): {', '.join(missing)}")
    rows = [compare_run(run) for run in args.runs]
    print(table(rows))
    import ctranslate2

    from utils.files import atomic_write_text

    about = {**environment("cpu"), "ctranslate2": ctranslate2.__version__, "threads": torch_threads()}
    payload = {"environment": about, "settings": COMMON, "runs": rows}
    atomic_write_text(Path(args.output), json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    sys.exit(main())
