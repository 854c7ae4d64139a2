"""What a run's test recorded of the model it scored (<test>/scores.json: the checkpoint, the
encoding and the model settings), held against the run's other records. Two questions, one answer
each for every reader (compare.py and its summaries, sweep.py, tools/archive.py), with or without
the run's checkpoints (an archived run keeps none: metrics.jsonl says which checkpoint was best):

- `stale_test`: training went on after the test and kept a better checkpoint, so the test scored a
  checkpoint that is no longer the run's best (test.py --run would score another one now).
- `untrained_changes`: the experiment keys on which an editable file (config.yaml) says other than
  what was trained (a checkpoint's own config, or what the test recorded of it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from artifacts.checkpoint_names import checkpoint_step
from settings.config import flatten, load_config
from settings.key_roles import refused_on_resume
from utils import run_files
from utils.errors import HarnessError
from utils.metrics import METRIC_SIGN
from utils.run_log import JsonlLogger
from utils.stored_files import read_text

JsonObject = Mapping[str, Any]


def best_validation(valid: Sequence[JsonObject], metric: str) -> Optional[JsonObject]:
    """The validation record the run's best checkpoint was chosen by (its finite best by `metric`,
    the first of equals; the last record when none is finite: the run's last checkpoint is then its best)."""
    if not valid:
        return None
    sign = METRIC_SIGN[metric]
    scored = [r for r in valid if r.get(metric) is not None and math.isfinite(r[metric])]
    return max(scored, key=lambda r: sign * r[metric]) if scored else valid[-1]


def tested_step(scores: JsonObject, folder: str) -> Optional[int]:
    """The training step of the checkpoint the test in the run's <folder>/ scored as the run's best
    (best_* or its last_* where none was scored yet); None for a checkpoint chosen by name (tested into
    test_<its name>/, an averaged one, an export): no later training makes that test stale."""
    checkpoint = scores.get("checkpoint")
    if not isinstance(checkpoint, str) or folder == f"test_{Path(checkpoint).stem}":
        return None
    return checkpoint_step(Path(checkpoint)) if Path(checkpoint).name.startswith(("best_", "last_")) else None


def stale_test(scores: JsonObject, records: Sequence[JsonObject], metric: str, folder: str) -> Optional[str]:
    """Why the test whose scores.json is `scores` (in the run's folder `folder`: test, test_<name>)
    is stale, by the run's metrics.jsonl `records` (JsonlLogger.history) and its checkpoint_metric:
    it scored the checkpoint of step s, and a validation after s is better, so training kept a new
    best. None when current, or not judged (`tested_step`)."""
    tested = tested_step(scores, folder)
    valid = [r for r in records if r.get("event") == "valid" and isinstance(r.get("step"), int)]
    best = best_validation(valid, metric)
    if tested is None or best is None or best["step"] <= tested:
        return None
    end = next((r for r in reversed(records) if r.get("event") == "end"), {})
    return (
        f"{folder}/ scored the checkpoint of step {tested} ({Path(scores['checkpoint']).name}), but training went on"
        + (f" to step {end['step']}" if isinstance(end.get("step"), int) else "")
        + f" and its best checkpoint is now the one of step {best['step']} (by {metric})"
    )


def run_stale_test(run_dir: Path, folder: str, metric: Optional[str] = None) -> Optional[str]:
    """`stale_test` of the run folder's <folder>/ (plain or archived), its records read here (and its
    checkpoint_metric from config.yaml, unless given, where there is a step to judge); None where
    they do not read (their readers name a damaged file)."""
    try:
        scores = json.loads(read_text(run_dir / folder / run_files.SCORES) or "{}")
        if not isinstance(scores, dict) or tested_step(scores, folder) is None:
            return None
        records = JsonlLogger(run_dir / run_files.METRICS).history()
        metric = metric or load_config(run_dir / run_files.CONFIG).training.checkpoint_metric
    except (ValueError, OSError, HarnessError):
        return None
    return stale_test(scores, records, metric, folder)


def untrained_changes(trained: JsonObject, recorded: JsonObject) -> list[tuple[str, Any, Any]]:
    """(key, trained value, recorded value) of each experiment key (one a resume may not change) on
    which the config `recorded` (nested, as config.yaml) says other than `trained` (what the model
    was trained with), on the keys both name (a key only one names: written by another release)."""
    old, new = flatten(dict(trained)), flatten(dict(recorded))
    both = set(old) & set(new)
    diff, refused, _ = refused_on_resume(
        {k: old[k] for k in both}, {k: new[k] for k in both}, old.get("model.positional.name")
    )
    return [(k, *diff[k]) for k in refused]


def recorded_model(scores: JsonObject) -> dict:
    """What a test recorded of the model it scored, as a nested config: its model settings (test.py
    writes them since they are recorded; older tests record the encoding's name only)."""
    model = dict(scores["model"]) if isinstance(scores.get("model"), dict) else {}
    if isinstance(scores.get("positional"), str):
        model["positional"] = {**(model.get("positional") or {}), "name": scores["positional"]}
    return {"model": model} if model else {}
