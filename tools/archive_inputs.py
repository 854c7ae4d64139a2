"""What `tools/archive.py` takes from a run (its tested folders and the files it keeps) and what `pack`
checks before it stores a run: each file against the run's own records, so that the archive never
keeps what its readers would refuse once the run and its checkpoints are gone. A file that fails is
one line naming it and what restores it; nothing of that pack is written.

- every `*.json` is JSON; a test folder's `scores.json` as compare.py reads it (study/read/run_records.py:
  an object, its metrics numbers), its `files` record a mapping;
- `metrics.jsonl` is one JSON object a line, as train.py appends them (utils/runtime.JsonlLogger);
- every output file a test folder's `scores.json` records (test.py: its rows and sha256) is there and
  is the file test.py wrote (`utils/stored_files.content_record`), not one edited or cut since.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from study.read.run_records import read_scores
from study.read.run_stats import refuse_stale_tests, retest_hint
from utils import run_files
from utils.errors import HarnessError
from utils.publish import ARCHIVE_PACK, pending_in, settle_run
from utils.run_log import JsonlLogger
from utils.stored_files import BUNDLE, bundle_members, logical_name, read_text, stored_exists, unlike_record

RUN_FILES = (
    run_files.CONFIG,
    run_files.METRICS,
    run_files.DATA_REPORT,
    run_files.TRAINING_LENGTHS,
    run_files.PROVENANCE,
)  # a run's own records, stored as they are (data_report.json by content)
RECORD_HINT = "it is the run's own record (train.py writes it): restore it, or leave the run out of the pack"


def tested_folders(run: Path) -> list[Path]:
    """A run's scored test folders: test/ and each test_<name>/ holding scores."""
    return [
        d for d in [run / "test", *sorted(run.glob("test_*"))] if d.is_dir() and stored_exists(d / run_files.SCORES)
    ]


def logical_files(folder: Path) -> list[Path]:
    """The files of a test folder (and its concat/k<K>/) by their plain names, each once."""
    names = set()
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            if path.name.endswith(BUNDLE):
                names.update(path.parent / member for member in bundle_members(path))
            else:
                names.add(path.with_name(logical_name(path.name)))
    return sorted(names)


def is_run(folder: Path) -> bool:
    return (folder / run_files.CONFIG).is_file()


def stored_run_files(run: Path) -> list[Path]:
    """The files of `run` the archive keeps, by their plain names (those it holds, in any stored form)."""
    files = [run / name for name in RUN_FILES] + [p for f in tested_folders(run) for p in logical_files(f)]
    return [p for p in files if stored_exists(p)]


def runs_to_pack(folder: Path) -> list[Path]:
    """The tested runs of `folder` (a run, or a folder of runs) under the readers' rule (a pack or a
    test.py stopped while publishing one: finished first, or refused), each checked against its own
    records (check_records); a folder that holds no run is one line."""
    if not is_run(folder):
        for place in pending_in(folder):  # (a run this tool was publishing for the first time when stopped)
            settle_run(place, ARCHIVE_PACK)
    runs = [folder] if is_run(folder) else sorted(p for p in folder.iterdir() if is_run(p))
    runs = [run for run in runs if not run.name.startswith(".")]  # (a pack cut short leaves .<run>.staging)
    if not runs:
        raise HarnessError(
            f"{folder} holds no run (no config.yaml in it or in its folders): give folders of runs (runs/demo) or "
            f"run folders to pack; nothing archived"
        )
    for run in runs:
        settle_run(run, ARCHIVE_PACK)
    tested = [run for run in runs if tested_folders(run)]  # (an untested run is not archived)
    for run in tested:
        check_records(run)
        refuse_stale_tests(run, tested_folders(run), ARCHIVE_PACK)  # (its checkpoints stay behind)
    return tested


def check_records(run: Path) -> None:
    """Refuse (HarnessError, one line naming the file) run `run` when one of the files the archive
    would keep of it fails the run's records."""
    texts = {path: read_text(path) for path in stored_run_files(run)}
    for path, text in texts.items():
        if path.name.endswith(".json") and path.name != run_files.SCORES:  # (scores.json: read_scores below)
            _json(path, text, retest_hint(path) if path.parent != run else RECORD_HINT)
        elif path.name == run_files.METRICS:
            try:
                JsonlLogger(path).read()  # (stored as it is: a plain file in the run and in the archive)
            except ValueError as e:
                raise HarnessError(f"{e}: {RECORD_HINT}") from None
    for test in tested_folders(run):
        scores_path = test / run_files.SCORES
        scores = read_scores(run, test.name)  # as compare.py reads it: a JSON object, its metrics numbers
        recorded = scores.get("files") or {}
        if not isinstance(recorded, dict):
            raise HarnessError(f'{scores_path}: its "files" record is not a mapping; {retest_hint(scores_path)}')
        for name, record in recorded.items():
            path = test / name
            text = texts.get(path)
            if text is None:
                raise HarnessError(f"{path} is missing, though {scores_path} records it; {retest_hint(path)}")
            found = unlike_record(text, record)
            if found is not None:
                raise HarnessError(
                    f"{path} is not the file test.py wrote ({found['rows']} lines, sha256 {found['sha256'][:12]}...; "
                    f"{scores_path} records another): edited or cut since the test? {retest_hint(path)}"
                )


def _json(path: Path, text: Optional[str], hint: str) -> object:
    try:
        return json.loads(text or "")
    except ValueError as e:
        raise HarnessError(f"{path} is not JSON ({e}); {hint}") from None
