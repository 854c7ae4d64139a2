"""What a checkpoint's file name says: its training step and, for a best checkpoint, its score
(`best_checkpoint_600_valid_loss=-2.39.pt`). Read without torch: the study reads which checkpoint a
test scored from names alone (artifacts/tested_run.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

_SCORE = re.compile(r"=(-?\d+(?:\.\d+)?(?:e-?\d+)?)\.pt$")
_STEP = re.compile(r"_checkpoint_(\d+)(?:_|\.pt$)")


def checkpoint_score(path: Path) -> Optional[float]:
    match = _SCORE.search(path.name)
    return float(match.group(1)) if match else None


def checkpoint_step(path: Path) -> Optional[int]:
    """The training step in a checkpoint's file name (`last_checkpoint_600.pt`,
    `best_checkpoint_600_valid_loss=-2.39.pt` -> 600)."""
    match = _STEP.search(path.name)
    return int(match.group(1)) if match else None
