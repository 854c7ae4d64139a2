"""What a run writes as it goes, without torch (the study and archive tools read these too): its
console lines (beside tqdm's bars), its metrics log (one JSON object per line), and the check that
a folder it will write into is writable."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Optional


def make_writable_folder(folder: Path) -> None:
    """Create `folder` if needed and prove it writable (a probe file, removed again); OSError if not.
    Callers check this before long work and turn the OSError into a message naming their setting."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / ".write-test.tmp"
    probe.write_text("")
    probe.unlink()


def log(message: str) -> None:
    """Print without breaking tqdm progress bars."""
    from tqdm import tqdm

    tqdm.write(message)
    sys.stdout.flush()  # lines appear at once in redirected logs too


class JsonlLogger:
    """Append one JSON object per line (machine-readable metrics log of a run)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def write(self, event: str, **fields: Any) -> None:
        record = {"event": event, "time": round(time.time(), 3), **fields}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def read(self, event: Optional[str] = None) -> list[dict]:
        if not self.path.is_file():
            return []
        rows = []
        with open(self.path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    row = None
                if not isinstance(row, dict):
                    raise ValueError(f"{self.path}:{number}: not a JSON object ({line.strip()[:60]!r})")
                rows.append(row)
        return [r for r in rows if event is None or r.get("event") == event]

    def history(self) -> list[dict]:
        """The records of the run its checkpoints continue: a resume from step s (its "start"
        record) drops the "train" and "valid" records that an interrupted attempt wrote after
        step s, since those steps were trained again (maybe with a changed learning rate)."""
        kept: list[dict] = []
        for r in self.read():
            if r.get("event") == "start" and r.get("resume") and isinstance(r.get("step"), int):
                kept = [
                    k
                    for k in kept
                    if k.get("event") not in ("train", "valid")
                    or not isinstance(k.get("step"), int)
                    or k["step"] <= r["step"]
                ]
            kept.append(r)
        return kept
