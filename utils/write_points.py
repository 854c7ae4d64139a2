"""Write points: the moments after which a kill leaves a different state on disk, counted so that
the crash tests (tests/guarantees/test_crash_consistency.py) can stop a command at each of them.

`HARNESS_KILL_AT=N` makes the N-th `write_point` SIGKILL the process there (`HARNESS_KILL_SIGNAL=TERM`:
a SIGTERM, which a command turns into a stop), and `HARNESS_WRITE_LOG=FILE` appends one line per
write point (what and where) to FILE. Every atomic write (utils/files.py) and every step of a
published set (utils/publish.py) calls it.

Start points are moments of a process's start-up that a test must reach exactly, where a signal
would otherwise arrive by chance: `HARNESS_PAUSE_AT=NAME` makes the process create
`$HARNESS_PAUSE_DIR/NAME.reached` at start point NAME and wait there until `NAME.go` exists.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

_write_points = 0


def write_point(what: str, path: Path) -> None:
    """A moment after which a kill leaves a different state on disk: counted for the crash tests."""
    global _write_points
    _write_points += 1
    log_file = os.environ.get("HARNESS_WRITE_LOG")
    if log_file:
        with open(log_file, "a", encoding="utf-8") as f:
            f.write(f"{_write_points}\t{what}\t{path}\n")
    if os.environ.get("HARNESS_KILL_AT") == str(_write_points):
        os.kill(os.getpid(), getattr(signal, "SIG" + os.environ.get("HARNESS_KILL_SIGNAL", "KILL")))


def start_point(name: str) -> None:
    """A moment of a start-up (a sweep job before its stop handlers are in place): with
    HARNESS_PAUSE_AT=name, the process says it is here and waits until the test lets it go."""
    if os.environ.get("HARNESS_PAUSE_AT") != name:
        return
    folder = Path(os.environ["HARNESS_PAUSE_DIR"])
    (folder / f"{name}.reached").touch()
    while not (folder / f"{name}.go").exists():  # (a signal meanwhile is handled as at this point)
        time.sleep(0.05)
