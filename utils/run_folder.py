"""What a run folder of this harness is, in one place: the files it holds (`RUN_FILES`; their names are
utils/run_files.py's), how to tell
one (`is_run_folder`, `run_folder_above`), its states (`RunFolder`: absent, foreign, fresh,
trained), what `train.py` may do with an existing one, and its one-writer lock (`RunLock`).

Only a folder that is provably the harness's own is ever emptied: it holds a `config.yaml` that
reads as an experiment config and nothing but the files training and testing write, at the top and
inside its own folders (`HARNESS_FILES`: a note or a hand-averaged checkpoint in checkpoints/ is the
user's). Anything else is refused with a message, so `--overwrite` or a sweep can never delete a
user's files.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import yaml

from utils import run_files
from utils.errors import ConfigError, HarnessError
from utils.run_log import JsonlLogger, make_writable_folder
from utils.stored_files import ARCHIVED

# Written by train.py (config, tokenizer, checkpoints, logs, data report) and test.py (<split>/,
# test_<file>/); the run lock's files (RunLock) are not content and never inspected.
RUN_FILES = {
    run_files.CONFIG,
    "tokenizer.json",
    "checkpoints",
    "tb",
    run_files.METRICS,
    run_files.DATA_REPORT,
    run_files.TRAINING_LENGTHS,
    run_files.PROVENANCE,  # what made the run: code, libraries, device, per session (utils/provenance.py)
    "data_report.json.sha256",  # a run copied back from results/: its corpus report stored once (tools/archive.py)
    "test",
    "valid",
    "ctranslate2",  # decoding.backend ctranslate2: the best checkpoint converted (artifacts/ctranslate2_conversion.py)
}
LOCK_FILES = (".lock", ".lock.pid")
# Inside those folders, what the writers put there (glob patterns per path part; a temporary an
# interrupted write left is the harness's too). Anything else is a user's file: --overwrite refuses.
# Temporaries an interrupted write leaves: ours (utils/files.py: .<name>.<random>.tmp) and Ignite's
# checkpoint temporaries (tempfile's names: tmp + 8 of [a-z0-9_]); a user's tmp_backup.pt is neither
OUR_TEMPORARY = ".*.tmp"
STAGING_SUFFIX = ".staging"  # a set being published (utils/publish.py): .<name>.staging/
JOURNAL_SUFFIX = ".publishing.json"  # ... and its journal: .<name>.publishing.json
IGNITE_TEMPORARY = "tmp" + "[a-z0-9_]" * 8
_TEMPORARIES = (OUR_TEMPORARY, IGNITE_TEMPORARY)
# What test.py writes into each of its output folders (and concat/k<K>/): named here, once, so that a
# new output is the harness's for --overwrite as soon as test.py writes it (commands/test.py imports it)
TEACHER_FORCED_BEYOND = run_files.TEACHER_FORCED_BEYOND  # per input: k, input, tokens and summed NLL beyond training
TEACHER_FORCED_PAIRS = run_files.TEACHER_FORCED_PAIRS  # per pair and k: the NLL of its pair's own tokens
TEST_OUTPUT_FILES = (
    run_files.SCORES,
    run_files.HYPOTHESES,
    run_files.REFERENCES,
    run_files.SOURCES,
    run_files.SOURCE_LENGTHS,
    TEACHER_FORCED_BEYOND,
    TEACHER_FORCED_PAIRS,
)
_TEST_FOLDERS = ("test", "valid", "test_*")  # test.py's output folders, and their concat/k<K>/
_TEST_OUTPUT_FOLDERS = (*_TEST_FOLDERS, *(f"{t}/concat/k*" for t in _TEST_FOLDERS))
HARNESS_FOLDERS = (
    "checkpoints",
    "tb",
    "tb/[0-9]*",  # add_embedding's projector files: tb/<step>/<tag>/
    "tb/[0-9]*/*",
    *_TEST_OUTPUT_FOLDERS,
    *(f"{t}/concat" for t in _TEST_FOLDERS),
    "ctranslate2",  # the conversion: artifacts/export.py's layout
    "ctranslate2/ctranslate2",
    "ctranslate2/tokenizer",  # a pretrained tokenizer's folder
)
HARNESS_FILES = (
    *(f"ctranslate2/{name}" for name in ("config.json", "README.md", "tokenizer.json", "tokenizer/*")),
    *(f"ctranslate2/ctranslate2/{name}" for name in ("model.bin", "config.json", "*_vocabulary.json")),
    *(f"checkpoints/{name}" for name in ("best_*.pt", "last_*.pt", "averaged_*.pt", *_TEMPORARIES)),
    "tb/events.out.tfevents.*",
    "tb/projector_config.pbtxt",
    "tb/[0-9]*/*/*",
    *(f"{folder}/{name}" for folder in _TEST_OUTPUT_FOLDERS for name in (*TEST_OUTPUT_FILES, OUR_TEMPORARY)),
    # the same outputs as the archive stores them (utils/stored_files.py), in a run copied back from results/
    *(f"{folder}/{name}{form}" for folder in _TEST_OUTPUT_FOLDERS for name in TEST_OUTPUT_FILES for form in ARCHIVED),
)


def is_run_folder(path: Path) -> bool:
    """A run folder of this harness (it holds a config.yaml and a checkpoints/ folder or a metrics log)."""
    path = Path(path)
    return (
        path.is_dir()
        and (path / run_files.CONFIG).is_file()
        and ((path / "checkpoints").is_dir() or (path / run_files.METRICS).is_file())
    )


def run_folder_above(path: Path) -> Optional[Path]:
    """The run folder that holds `path` (or is it), if any."""
    path = Path(path).resolve()
    for folder in (path, *path.parents):
        if is_run_folder(folder):
            return folder
    return None


def _is_run_entry(path: Path) -> bool:
    name = path.name
    return (
        name in RUN_FILES
        or (name.startswith("test_") and path.is_dir())
        or (name.startswith(".") and name.endswith(".tmp"))  # an interrupted atomic write
        or (name.startswith(".") and name.endswith((STAGING_SUFFIX, JOURNAL_SUFFIX)))  # an unpublished test set
    )


def _has_run_config(run_dir: Path) -> bool:
    try:
        raw = yaml.safe_load((run_dir / run_files.CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(raw, dict) and {"model", "training", "data"} <= set(raw)


def _has_results(run_dir: Path) -> bool:
    if (
        any(run_dir.glob("checkpoints/*.pt"))
        or any(p.is_dir() for p in run_dir.glob("test*"))
        or (run_dir / "valid").is_dir()
    ):
        return True
    try:
        return bool(JsonlLogger(run_dir / run_files.METRICS).read("end"))  # no log: []
    except (OSError, ValueError):  # damaged: count it as results, so that nothing is deleted on a guess
        return True


def matches(relative: Path, patterns: tuple[str, ...]) -> bool:
    """Whether a relative path is one of `patterns` (glob patterns, matched whole, part by part)."""
    parts = relative.parts
    return any(
        len(parts) == len(Path(p).parts) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, Path(p).parts))
        for p in patterns
    )


def users_files_inside(run_dir: Path) -> tuple[str, ...]:
    """The files and folders inside the run's own folders (checkpoints/, tb/, test*/, valid/) that
    the harness does not write (a user's notes, a hand-averaged checkpoint), relative to the run.
    A link is judged by its own name and never followed (deleting it loses nothing it points to)."""
    found = []
    for top in sorted(run_dir.iterdir()):
        if top.is_symlink() or not top.is_dir() or not matches(Path(top.name), HARNESS_FOLDERS):
            continue
        for folder, dirs, files in os.walk(top):  # (links to folders are listed in dirs, not entered)
            for name in sorted(dirs + files):
                path = Path(folder) / name
                relative = path.relative_to(run_dir)
                is_folder = path.is_dir() and not path.is_symlink()
                if not matches(relative, HARNESS_FOLDERS if is_folder else HARNESS_FILES):
                    found.append(str(relative) + ("/" if is_folder else ""))
            dirs[:] = [d for d in dirs if matches((Path(folder) / d).relative_to(run_dir), HARNESS_FOLDERS)]
    return tuple(found)


@dataclass
class RunFolder:
    """An inspected run folder: `state` is one of
    absent   (missing or empty),
    foreign  (holds files that are not the harness's: never touched; `foreign` lists some),
    fresh    (the harness's own, with no checkpoint and no results: a start that failed or stopped
              before saving anything of value),
    trained  (the harness's own, with a checkpoint, test outputs or a finished training log)."""

    path: Path
    state: str
    foreign: tuple[str, ...] = ()
    users_files: tuple[str, ...] = ()  # inside its own folders (checkpoints/notes.txt): never deleted

    @classmethod
    def inspect(cls, run_dir: Path, written_config: Callable[[Path], bool]) -> "RunFolder":
        """The folder's state; `written_config(path)` tells a config.yaml train.py wrote from a user's
        own (settings/config.py: is_written_config; the config code sits above utils/)."""
        run_dir = Path(run_dir)
        if run_dir.exists() and not run_dir.is_dir():
            raise ConfigError(
                f"run_dir {run_dir} is a file, not a folder; set run_dir to a folder (--set run_dir=runs/<name>)"
            )
        try:  # the lock of a start in progress is not content
            entries = sorted(p for p in run_dir.iterdir() if p.name not in LOCK_FILES) if run_dir.is_dir() else []
        except OSError as e:
            raise ConfigError(
                f"run_dir {run_dir} cannot be read ({e.strerror}); set run_dir to a folder you can write"
            ) from None
        if not entries:
            return cls(run_dir, "absent")
        foreign = tuple(p.name for p in entries if not _is_run_entry(p))
        if foreign or not _has_run_config(run_dir):
            return cls(run_dir, "foreign", foreign or ("config.yaml (not an experiment config)",))
        users = users_files_inside(run_dir)
        if _has_results(run_dir):
            return cls(run_dir, "trained", users_files=users)
        if not written_config(run_dir / run_files.CONFIG):  # never a user's own config file
            return cls(run_dir, "foreign", ("config.yaml (a config written by hand, not by train.py)",))
        return cls(run_dir, "fresh", users_files=users)

    def describe_foreign(self) -> str:
        shown = ", ".join(self.foreign[:5]) + (f" and {len(self.foreign) - 5} more" if len(self.foreign) > 5 else "")
        return f"{self.path} is not a run folder of this harness (it holds {shown})"

    def check(self, resume: bool, overwrite: bool) -> Optional[str]:
        """Refuse (ConfigError / FileExistsError) what may not be done; otherwise return what `apply`
        will do: None (use as it is), 'create', 'clear' (own files of a run with no checkpoint) or 'delete'."""
        if overwrite and self.path.is_symlink():
            raise FileExistsError(
                f"--overwrite refused: run_dir {self.path} is a symbolic link (to "
                f"{self.path.resolve()}); --overwrite never follows links: set run_dir to the "
                f"folder itself, or remove the link"
            )
        if self.state == "absent":
            if resume:
                raise FileExistsError(
                    f"--resume: nothing to resume in {self.path} (no such run); start without --resume"
                )
            return "create"
        if self.state == "foreign":
            if overwrite:
                raise FileExistsError(
                    f"--overwrite refused: {self.describe_foreign()}, so nothing was deleted; "
                    f"set run_dir to a new folder, or empty this one yourself"
                )
            raise FileExistsError(f"{self.describe_foreign()}; set run_dir to a new folder (--set run_dir=runs/<name>)")
        if self.state == "fresh" or overwrite:
            self.check_nothing_of_users(overwrite)
        if self.state == "fresh":
            return "clear"
        if overwrite:
            return "delete"
        if not resume:
            raise FileExistsError(
                f"run folder {self.path} already exists. Use --resume to continue it, "
                f"--overwrite to delete it and start over, or --set run_dir=<new folder>."
            )
        return None

    def check_nothing_of_users(self, overwrite: bool) -> None:
        """Emptying the folder would delete the user's files inside the run's own folders: refuse
        (as for a user's file beside them), rather than keep them beside a new run's files."""
        if self.users_files:
            shown = ", ".join(self.users_files[:5]) + (
                f" and {len(self.users_files) - 5} more" if len(self.users_files) > 5 else ""
            )
            refused = "--overwrite refused" if overwrite else "starting over (the run has no checkpoint) refused"
            raise FileExistsError(
                f"{refused}: the run folder {self.path} holds files the harness did not write ({shown}), "
                f"so nothing was deleted; move them out of the run folder, or set run_dir to a new folder"
            )

    def apply(self, action: Optional[str], say=print) -> None:
        """Carry out `check`'s decision; call it only once everything else at start-up has been checked."""
        if action in ("delete", "clear"):
            say(
                f"--overwrite: deleting the contents of the run folder {self.path}"
                if action == "delete"
                else f"starting over in {self.path}: it holds no checkpoint (an earlier start failed or stopped "
                f"before its first checkpoint)"
            )
            # Entry by entry, all of them the harness's own (checked by `inspect`): the folder itself
            # stays (it may be the working directory) and so does the lock this start holds.
            for entry in self.path.iterdir():
                if entry.name not in LOCK_FILES:
                    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        try:
            make_writable_folder(self.path)
        except OSError as e:
            raise ConfigError(
                f"run_dir {self.path} cannot be created or written ({e.strerror}); set run_dir "
                f"to a folder you can write (--set run_dir=runs/<name>)"
            ) from None


class RunLock:
    """One writer at a time per run folder (train.py, test.py into it): an OS lock on <run>/.lock
    (filelock; the OS releases it when its holder dies, so a killed run never leaves it stuck), with
    the holder's PID and command in <run>/.lock.pid, since the lock itself records none. Reliable on
    local filesystems; on network filesystems (NFS) it is only as good as their flock support."""

    _held_here: set[Path] = set()  # the run folders this process holds (a command's own nested work)

    def __init__(self, run_dir: Path, command: str) -> None:
        self.run_dir, self.command = Path(run_dir), command
        self._lock = None

    @classmethod
    def held_here(cls, run_dir: Path) -> bool:
        """Whether this process holds the run folder's lock (test.py converting its run for CTranslate2)."""
        return (Path(run_dir) / LOCK_FILES[0]).resolve() in cls._held_here

    def files(self) -> tuple[Path, Path]:
        """The lock file and the holder's record: <run>/.lock and <run>/.lock.pid."""
        return self.run_dir / LOCK_FILES[0], self.run_dir / LOCK_FILES[1]

    def in_use(self, who: str) -> str:
        return f"{self.run_dir} is in use by another process ({who}); wait for it to end or stop it, then try again"

    def acquire(self) -> "RunLock":
        from filelock import FileLock, Timeout

        from utils.user_paths import check_home_expanded

        if not self.run_dir.exists():  # a run_dir=~/x the shell left as it is: no '~' folder made here
            check_home_expanded(self.run_dir, "run_dir")
        lock_file, pid_file = self.files()
        lock = FileLock(str(lock_file), timeout=0, is_singleton=False)
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except Timeout:  # (a TimeoutError, so an OSError: caught first)
            who = self._recorded(pid_file) or "unknown process"
            raise HarnessError(self.in_use(who)) from None
        except OSError as e:
            raise ConfigError(
                f"{self.run_dir} cannot be created or written ({e.strerror}); choose a folder you "
                f"can write (train.py: --set run_dir=runs/<name>; test.py: --output)"
            ) from None
        self._lock = lock
        pid_file.write_text(f"PID {os.getpid()}: {self.command}\n", encoding="utf-8")
        RunLock._held_here.add(lock_file.resolve())
        return self

    def release(self) -> None:
        if self._lock is not None:
            lock_file, pid_file = self.files()
            RunLock._held_here.discard(lock_file.resolve())
            pid_file.unlink(missing_ok=True)
            self._lock.release()
            self._lock = None

    @staticmethod
    def _recorded(pid_file: Path) -> Optional[str]:
        try:
            return pid_file.read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    @classmethod
    def recorded_holder(cls, run_dir: Path) -> Optional[str]:
        """What <run>/.lock.pid says of the lock's holder ('PID n: command'), None without one."""
        return cls._recorded(Path(run_dir) / LOCK_FILES[1])

    @classmethod
    def holder(cls, run_dir: Path) -> Optional[str]:
        """Who holds the run folder's lock ('PID n: command'), or None. Read from .lock.pid alone
        (written once the lock is held, removed before it is released) and believed only while that
        PID lives (a killed holder leaves it behind): never a probe of the lock itself, which would
        make a train.py starting at that moment fail with 'in use'."""
        who = cls.recorded_holder(run_dir)
        pid = who.split(":")[0].removeprefix("PID ").strip() if who else ""
        if not pid.isdigit():
            return None
        try:
            os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
        except ProcessLookupError:
            return None
        except PermissionError:  # it exists, as another user's process
            pass
        return who

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
