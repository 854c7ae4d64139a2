#!/usr/bin/env python
"""Backfill provenance.json into archived runs that were trained before train.py wrote it.

What is read, not guessed: each training session's start and end times, steps, world size and
whether it finished (metrics.jsonl's start/end records) and the precision (config.yaml). What is
inferred, and named in the file's `inferred` list:

- device_kind / device: from throughput. A training step costs about 6 x parameters FLOPs per target
  token; a run whose mean rate 6 * params * tokens/s exceeds GPU_FLOPS (150 GFLOP/s, beyond what a
  2-core CPU sustains on this model) was on a GPU ("cuda (inferred)"), else on a CPU;
- code_schema: the code version, as a label of the run's outputs' schema (the test outputs it has and
  the keys of its scores.json): runs made by code that wrote the same outputs share it. The commit and
  the code fingerprint were not recorded: null.

  python tools/backfill_provenance.py results/demo/* results/length/* results/report/length/*

A run that has a provenance.json is left alone.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from tools.archive import logical_files, tested_folders  # noqa: E402
from utils import run_files  # noqa: E402
from utils.files import atomic_write_text  # noqa: E402
from utils.provenance import FILE, SCHEMA  # noqa: E402
from utils.run_log import JsonlLogger  # noqa: E402
from utils.stored_files import read_text  # noqa: E402

GPU_FLOPS = 1.5e11


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(seconds))


def output_schema(run: Path) -> str:
    """A label of what the run's test wrote: its output files and its scores.json keys."""
    test = run / "test"
    names = sorted(str(p.relative_to(test)) for p in logical_files(test)) if test.is_dir() else []
    names = sorted({n if not n.startswith("concat/") else "concat/k*/" + n.rsplit("/", 1)[-1] for n in names})
    keys = sorted(json.loads(read_text(test / run_files.SCORES) or "{}"))
    return "schema-" + hashlib.sha256(json.dumps([names, keys]).encode()).hexdigest()[:8]


def sessions_of(records: list[dict], precision: str, device_kind: str, schema: str) -> list[dict]:
    sessions: list[dict] = []
    for r in records:
        if r["event"] == "start":
            sessions.append(
                {
                    "started": iso(r["time"]),
                    "ended": None,
                    "resume": bool(r.get("resume")),
                    "step_started": r.get("step"),
                    "command": None,
                    "commit": None,
                    "uncommitted_changes": None,
                    "diff_sha256": None,
                    "code_fingerprint": None,
                    "code_schema": schema,
                    "device_kind": device_kind,
                    "device": f"{device_kind} (inferred)",
                    "precision": precision,
                    "world_size": r.get("world_size", 1),
                }
            )
        elif r["event"] == "end" and sessions:
            sessions[-1].update(ended=iso(r["time"]), step_ended=r.get("step"), finished=r.get("finished"))
    return sessions


def backfill(run: Path) -> str:
    if (run / FILE).exists():
        return "has provenance.json: left alone"
    records = JsonlLogger(run / run_files.METRICS).history()
    config = yaml.safe_load((run / run_files.CONFIG).read_text(encoding="utf-8"))
    speeds = [r["tokens_per_sec"] for r in records if r["event"] == "train" and r.get("tokens_per_sec")]
    params = next((r["params"] for r in records if r.get("params")), None)
    if not speeds or not params:
        return "no throughput or parameter count in metrics.jsonl: not backfilled"
    flops = 6 * params * statistics.fmean(speeds)
    kind = "cuda" if flops > GPU_FLOPS else "cpu"
    precision = (config.get("training") or {}).get("precision", "fp32")
    data = {
        "schema": SCHEMA,
        "backfilled_by": "tools/backfill_provenance.py (metrics.jsonl, config.yaml, test outputs)",
        "inferred": ["device_kind", "device", "code_schema"],
        "sessions": sessions_of(records, precision, kind, output_schema(run)),
    }
    atomic_write_text(run / FILE, json.dumps(data, indent=2) + "\n")
    return (
        f"{kind} (6 x params x tokens/s = {flops / 1e9:.0f} GFLOP/s), {precision}, {data['sessions'][0]['code_schema']}"
    )


def main(argv: list[str]) -> int:
    runs = [Path(a) for a in argv if (Path(a) / run_files.CONFIG).is_file() and tested_folders(Path(a))]
    if not runs:
        print("usage: tools/backfill_provenance.py <archived run folder> ...", file=sys.stderr)
        return 2
    for run in runs:
        print(f"{run}: {backfill(run)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
