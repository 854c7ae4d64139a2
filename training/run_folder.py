"""What is a run folder of this harness, and what `train.py` may do with an existing one.

Only a folder that is provably the harness's own is ever emptied: it holds a `config.yaml` that
reads as an experiment config and nothing but the files training and testing write. Anything else
is refused with a message, so `--overwrite` or a sweep can never delete a user's files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from utils.config import ConfigError
from utils.runtime import JsonlLogger, make_writable_folder

# Written by train.py (config, tokenizer, checkpoints, logs, data report) and test.py (<split>/, test_<file>/).
RUN_FILES = {"config.yaml", "tokenizer.json", "checkpoints", "tb", "metrics.jsonl", "data_report.json",
             "test", "valid"}


def _is_run_entry(path: Path) -> bool:
    name = path.name
    return (name in RUN_FILES or (name.startswith("test_") and path.is_dir())
            or (name.startswith(".") and name.endswith(".tmp")))  # an interrupted atomic write


def _has_run_config(run_dir: Path) -> bool:
    try:
        raw = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(raw, dict) and {"model", "training", "data"} <= set(raw)


def _has_results(run_dir: Path) -> bool:
    if any(run_dir.glob("checkpoints/*.pt")) or any(p.is_dir() for p in run_dir.glob("test*")) \
            or (run_dir / "valid").is_dir():
        return True
    try:
        return bool(JsonlLogger(run_dir / "metrics.jsonl").read("end"))  # no log: []
    except (OSError, ValueError):  # damaged: count it as results, so that nothing is deleted on a guess
        return True


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

    @classmethod
    def inspect(cls, run_dir: Path) -> "RunFolder":
        run_dir = Path(run_dir)
        if run_dir.exists() and not run_dir.is_dir():
            raise ConfigError(f"run_dir {run_dir} is a file, not a folder; set run_dir to a folder "
                              f"(--set run_dir=runs/<name>)")
        try:
            entries = sorted(run_dir.iterdir()) if run_dir.is_dir() else []
        except OSError as e:
            raise ConfigError(f"run_dir {run_dir} cannot be read ({e.strerror}); set run_dir to a folder you "
                              f"can write") from None
        if not entries:
            return cls(run_dir, "absent")
        foreign = tuple(p.name for p in entries if not _is_run_entry(p))
        if foreign or not _has_run_config(run_dir):
            return cls(run_dir, "foreign", foreign or ("config.yaml (not an experiment config)",))
        return cls(run_dir, "trained" if _has_results(run_dir) else "fresh")

    def describe_foreign(self) -> str:
        shown = ", ".join(self.foreign[:5]) + (f" and {len(self.foreign) - 5} more" if len(self.foreign) > 5 else "")
        return f"{self.path} is not a run folder of this harness (it holds {shown})"

    def check(self, resume: bool, overwrite: bool) -> Optional[str]:
        """Refuse (ConfigError / FileExistsError) what may not be done; otherwise return what `apply`
        will do: None (use as it is), 'create', 'clear' (own files of a run with no checkpoint) or 'delete'."""
        if self.state == "absent":
            if resume:
                raise FileExistsError(f"--resume: nothing to resume in {self.path} (no such run); start "
                                      f"without --resume")
            return "create"
        if self.state == "foreign":
            if overwrite:
                raise FileExistsError(f"--overwrite refused: {self.describe_foreign()}, so nothing was deleted; "
                                      f"set run_dir to a new folder, or empty this one yourself")
            raise FileExistsError(f"{self.describe_foreign()}; set run_dir to a new folder "
                                  f"(--set run_dir=runs/<name>)")
        if self.state == "fresh":
            return "clear"
        if overwrite:
            return "delete"
        if not resume:
            raise FileExistsError(f"run folder {self.path} already exists. Use --resume to continue it, "
                                  f"--overwrite to delete it and start over, or --set run_dir=<new folder>.")
        return None

    def apply(self, action: Optional[str], say=print) -> None:
        """Carry out `check`'s decision; call it only once everything else at start-up has been checked."""
        if action == "delete":
            say(f"--overwrite: deleting the run folder {self.path}")
            shutil.rmtree(self.path)
        elif action == "clear":
            say(f"starting over in {self.path}: it holds no checkpoint (an earlier start failed or stopped "
                f"before its first checkpoint)")
            for entry in self.path.iterdir():  # all of them the harness's own (checked by `inspect`)
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        try:
            make_writable_folder(self.path)
        except OSError as e:
            raise ConfigError(f"run_dir {self.path} cannot be created or written ({e.strerror}); set run_dir "
                              f"to a folder you can write (--set run_dir=runs/<name>)") from None


def resume_changes(saved: dict, new: dict) -> dict[str, tuple]:
    """{key: (saved value, new value)} for the settings a resume changes (dicts as from `to_dict`);
    ConfigError naming every change a resume may not make (the keys' roles: utils/key_roles.py)."""
    from utils.config import flatten
    from utils.key_roles import refused_on_resume

    encoding = saved.get("model", {}).get("positional", {}).get("name")
    changed, refused, allowed = refused_on_resume(flatten(saved), flatten(new), encoding)
    if refused:
        details = "; ".join(f"{k}: {changed[k][0]!r} -> {changed[k][1]!r}" for k in refused)
        raise ConfigError(f"a resumed run keeps its experiment settings, but this resume changes {details}. "
                          f"Start a new run for that (--set run_dir=<new folder>); a resume may change "
                          f"only: {allowed}")
    return changed
