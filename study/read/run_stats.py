"""A run's folders and statistics over the runs of a comparison (a configuration's columns over its seeds)."""

from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from artifacts.tested_run import run_stale_test
from study.read.run_files_read import LogLine
from study.records import RunRecord, Stats
from utils import run_files
from utils.errors import HarnessError
from utils.metrics import METRICS
from utils.stored_files import read_text


def numeric_columns() -> Mapping[str, str]:
    """The numeric columns (key -> table title): training figures, every test metric (utils/metrics.py), the rest."""
    return {
        "train_loss": "train loss",
        "valid_loss": "valid loss",
        "valid_accuracy": "valid acc",
        **{m.name: f"test {m.label}" for m in METRICS},
        "longer_bleu": "BLEU longer-than-training",
        "params": "params",
        "train_minutes": "train min",
        "tokens_per_sec": "tgt tokens/s",
        "steps": "steps",
    }


def test_folder(run: RunRecord) -> Path:
    """<run>/test/, or <run>/test_<name>/ for a variant (tested with other test-time settings)."""
    return Path(run.test_dir or Path(run.run) / "test")


STALE_MARK = "§"  # a row holding a stale test (artifacts/tested_run.py), said under the table


def stale_note(runs: Sequence[RunRecord]) -> list[str]:
    """The lines under a table naming each run whose test is stale and the command that re-tests it."""
    return [
        f"{STALE_MARK} `{r.name}`: {r.stale_test}: its test figures are left out of the paired "
        f"tests and findings; {retest_hint(test_folder(r))}."
        for r in runs
        if r.stale_test
    ]


def refuse_stale_tests(run_dir: Path, folders: Sequence[Path], reader: str) -> None:
    """HarnessError naming the first of `folders` whose test is stale, for a `reader` that must not keep it."""
    for folder in folders:
        why = run_stale_test(run_dir, folder.name)
        if why:
            raise HarnessError(f"{run_dir}: {why}: {reader} keeps only current tests; {retest_hint(folder)}")


def retest_hint(path: str | Path) -> str:
    """How to write again the test outputs that hold `path`: the test.py command, or leave the run out."""
    path = Path(path)
    test_dir = next((p for p in (path, *path.parents) if is_test_folder(p)), None)
    if test_dir is None:
        return "test the run again (python test.py --run <its run folder> --overwrite) or leave it out"
    command = ["python", "test.py", "--run", str(test_dir.parent)]
    if test_dir.name != "test":  # a variant: its own folder and test-time settings
        try:
            settings = json.loads(read_text(test_dir / run_files.SCORES))["test_time_overrides"]
            sets = [f"{key}={json.dumps(value)}" for key, value in settings.items()]
        except (OSError, ValueError, TypeError, KeyError, AttributeError, HarnessError):  # lost with the file
            return f"delete {test_dir} and test the variant again (sweep.py --variant) or leave the run out"
        command += ["--output", str(test_dir), *(x for key_value in sets for x in ("--set", key_value))]
    return f"test the run again ({shlex.join([*command, '--overwrite'])}) or leave it out"


def is_test_folder(path: Path) -> bool:
    return (path.name == "test" or path.name.startswith("test_")) and (path.parent / run_files.CONFIG).is_file()


def mean_std(values: Sequence) -> tuple[Optional[float], Optional[float], int]:
    """Mean and sample std of the values that are not None (std needs two), and their count."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None, None, 0
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None), len(xs)


def stats(values: Sequence) -> Stats:
    return Stats(*mean_std(values))


def seed_wins(
    runs: Sequence[RunRecord],
    baseline_runs: Sequence[RunRecord],
    score: Callable[[RunRecord], Optional[float]],
    margin: float = 0.0,
) -> Optional[tuple[int, int]]:
    """(wins, pairs): over the seeds `runs` share with `baseline_runs`, how many score more than `margin`
    (the tie margin) above the baseline's run with the same seed (None when no scored seed is shared)."""
    base = {r.seed: score(r) for r in baseline_runs if r.seed is not None and not r.stale_test}
    pairs = [
        (score(r), base[r.seed])
        for r in runs
        if r.seed in base and not r.stale_test and score(r) is not None and base[r.seed] is not None
    ]
    return (sum(a - b > margin for a, b in pairs), len(pairs)) if pairs else None


def training_minutes(lines: Sequence[LogLine]) -> Optional[float]:
    """Minutes of training over every session of a run: a session's own `end` record, else (stopped
    without one) the time from its `start` to its last record."""
    sessions: list[list[LogLine]] = []
    for line in lines:
        if line.event == "start" or not sessions:
            sessions.append([])
        sessions[-1].append(line)
    total, counted = 0.0, False
    for session in sessions:
        end = next((line for line in session if line.event == "end" and line.train_seconds is not None), None)
        first, last = session[0], session[-1]
        if end is not None:
            total, counted = total + end.train_seconds, True
        elif first.event == "start" and len(session) > 1 and first.time is not None and last.time is not None:
            total, counted = total + last.time - first.time, True
    return total / 60 if counted else None


def joined_training_k(run: RunRecord) -> int:
    """The most test pairs a run's training examples joined (data.train_concat.max_k), 1 without joins."""
    joins = run.config.data.train_concat
    return int(joins.max_k or 2) if joins.prob else 1  # 2: the schema's default max_k
