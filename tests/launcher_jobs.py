"""The jobs tests/commands/test_launchers.py gives the local launcher. A job's process unpickles its job by
importing the module that defines it: this one imports nothing heavy, where the test module pulls
in torch and the commands (seconds in every job's process)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass
class Reported:
    """What the job returns, as a sweep job's Outcome would (the launcher passes it on as it is)."""

    run_dir: str
    status: str


class VisibleDevices:
    """A job that reports the GPUs it was given (and stays a moment, so the four overlap)."""

    def __call__(self) -> Reported:
        time.sleep(1.0)
        return Reported(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), "scored")


class Fails:
    def __call__(self):
        raise FileExistsError("runs/x/config.yaml exists")
