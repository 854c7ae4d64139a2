"""What made a run: `<run>/provenance.json`, one session per start of train.py (the first, and each
resume), each written when the session starts and completed when it ends.

A session records the code (the git commit, whether tracked files had uncommitted changes and a
hash of that diff, and a fingerprint of the tracked tree outside results/ and runs/, so that
archiving a run does not make the next run's code look different), the libraries (torch, CUDA,
ctranslate2), the machine (device kind and name, precision, world size), the times and the command
line. compare.py reads it (`run_provenance`) to keep runs of different devices or precisions out of
one row's seeds and to mark rows whose seeds span code versions or devices.

Runs archived before this file existed carry a backfilled one (tools/backfill_provenance.py): what
could be read from the run (times, world size, precision) and what was inferred (the device kind
from throughput, the code version from the outputs' schema), each inferred field named in
`inferred`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from utils import run_files
from utils.files import atomic_write_text

FILE = run_files.PROVENANCE
SCHEMA = 1
ROOT = Path(__file__).resolve().parents[1]
OUTSIDE_CODE = ("results/", "runs/")  # archived and running experiments: not code


def git_output(*args: str) -> Optional[bytes]:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _tracked_code() -> Optional[list[str]]:
    listed = git_output("ls-files", "-z")
    if listed is None:
        return None
    return sorted(p for p in listed.decode("utf-8", "replace").split("\0") if p and not p.startswith(OUTSIDE_CODE))


def code_fingerprint(files: Optional[list[str]] = None) -> Optional[str]:
    """sha256 over the files git tracks outside results/ and runs/, as they are on disk (path and
    content: uncommitted edits count; outputs a command left in the tree do not); None outside a
    git checkout."""
    files = _tracked_code() if files is None else files
    if files is None:
        return None
    digest = hashlib.sha256()
    for name in files:
        path = ROOT / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


SNAPSHOT = ".code_snapshot.json"  # what git says of the checkout, for a copy of it without .git


def code_state() -> dict:
    """The commit, its uncommitted changes to code (a flag and a hash of the diff) and the fingerprint;
    in a copy of the checkout without git (a GPU machine's), from the snapshot taken where git was
    (`snapshot_state`)."""
    head = git_output("rev-parse", "HEAD")
    if head is None and (ROOT / SNAPSHOT).is_file():
        return snapshot_state()
    diff = git_output("diff", "HEAD", "--", ".", *(f":(exclude){p}" for p in OUTSIDE_CODE))
    return {
        "commit": head.decode().strip() if head else None,
        "uncommitted_changes": None if diff is None else bool(diff),
        "diff_sha256": hashlib.sha256(diff).hexdigest() if diff else None,
        "code_fingerprint": code_fingerprint(),
    }


def write_snapshot() -> dict:
    """Record, where git is, the code state and the tracked files in ROOT/SNAPSHOT (tools/gpu_study.sh
    takes it to the GPU machine, whose copy of the checkout has no .git)."""
    state = {**code_state(), "files": _tracked_code()}
    if state["commit"] is None or state["files"] is None:
        raise RuntimeError("no git checkout here: take the snapshot in the project's git checkout")
    atomic_write_text(ROOT / SNAPSHOT, json.dumps(state) + "\n")
    return state


def snapshot_state() -> dict:
    """The snapshot's commit, with the fingerprint of the files as they are here: a file changed since
    the snapshot (a different fingerprint) counts as an uncommitted change."""
    snap = json.loads((ROOT / SNAPSHOT).read_text(encoding="utf-8"))
    fingerprint = code_fingerprint(snap["files"])
    same = fingerprint == snap["code_fingerprint"]
    return {
        "commit": snap["commit"],
        "uncommitted_changes": bool(snap["uncommitted_changes"]) or not same,
        "diff_sha256": snap["diff_sha256"] if same else None,
        "code_fingerprint": fingerprint,
        "code_from": SNAPSHOT,
    }


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def machine_state(device, precision: str, world_size: int) -> dict:
    """The libraries and the device a session ran on (`device`: a torch.device)."""
    import torch

    try:
        import ctranslate2

        ct2 = ctranslate2.__version__
    except Exception:  # not installed, or an install that does not load: not what made the run
        ct2 = None
    kind = device.type
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "ctranslate2": ct2,
        "device_kind": kind,
        "device": torch.cuda.get_device_name(device) if kind == "cuda" else cpu_name() if kind == "cpu" else kind,
        "precision": precision,
        "world_size": world_size,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_provenance(run_dir: Path) -> Optional[dict]:
    """The run's provenance.json (None when it has none: a run trained before it existed). A file that
    is there but damaged, not of this shape ({"sessions": [{...}, ...]}) or with no session is refused
    in one line naming it, never read as "unknown" (which would let compare.py pool its seeds with any
    device's)."""
    from utils.errors import HarnessError

    path = Path(run_dir) / FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) else "not JSON text"
        raise HarnessError(f"{path} is unreadable ({why}): {RESTORE}") from None
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, list) or not all(isinstance(x, dict) for x in sessions):
        raise HarnessError(f'{path} is not a provenance record ({{"sessions": [{{...}}, ...]}}): {RESTORE}')
    if not sessions:  # train.py writes the file with its first session: none is a record of nothing
        raise HarnessError(f"{path} records no session of train.py: {RESTORE}")
    return data


RESTORE = (
    "it records what made the run (train.py writes it); restore it from a copy or from git, or move it "
    "away to read the run as one without provenance"
)


def _write(run_dir: Path, data: dict) -> None:
    atomic_write_text(Path(run_dir) / FILE, json.dumps(data, indent=2) + "\n")


def start_session(run_dir: Path, device, precision: str, world_size: int, resume: bool, step: int) -> None:
    """Add this session (train.py's start or resume) to the run's provenance.json."""
    data = read_provenance(run_dir) or {"schema": SCHEMA, "sessions": []}
    session = {
        "started": _now(),
        "ended": None,
        "resume": resume,
        "step_started": step,
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else [],
        **code_state(),
        **machine_state(device, precision, world_size),
    }
    data["sessions"].append(session)
    _write(run_dir, data)


def end_session(run_dir: Path, step: int, finished: bool) -> None:
    """Complete the session this process started: its end time, step and whether training finished."""
    data = read_provenance(run_dir)
    if data is None or not data["sessions"]:
        return
    data["sessions"][-1].update(ended=_now(), step_ended=step, finished=finished)
    _write(run_dir, data)


def run_provenance(run_dir: Path) -> dict:
    """What compare.py groups by: the device kinds, device names, precisions and code versions of a
    run's sessions (sorted, distinct; "unknown" where nothing was recorded or inferred), and what its
    provenance page shows: the sessions' start dates, the step each resumed session started at and
    the fields that were inferred."""
    data = read_provenance(run_dir) or {}
    sessions = data.get("sessions") or []

    def distinct(key: str) -> list[str]:
        values = {str(s.get(key)) for s in sessions if s.get(key) is not None}
        return sorted(values) or ["unknown"]

    codes = {s.get("code_fingerprint") or s.get("code_schema") for s in sessions}
    return {
        "device_kind": distinct("device_kind"),
        "device": distinct("device"),
        "precision": distinct("precision"),
        "code": sorted(c if c.startswith("schema-") else c[:12] for c in map(str, codes) if c != "None") or ["unknown"],
        "dates": sorted({str(s["started"])[:10] for s in sessions if s.get("started")}),
        "resumed": [s.get("step_started") for s in sessions if s.get("resume")],
        "inferred": list(data.get("inferred") or []),
    }
