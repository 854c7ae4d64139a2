"""Every file a command writes goes through here: one guard that says whether the target may be
written at all, and atomic writes (a temporary in the same folder, then a rename), so a failed or
killed write never leaves a partial file and never destroys what was there.

The guard (`check_target`): resolved through symlinks, a target is never one of the command's
inputs, never an existing file without `--overwrite`, never a run folder or a file inside a run
folder that the command does not own (`own` names what it may write there, e.g. average.py's
`checkpoints/averaged_*.pt`, test.py's `test/`).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Optional

from utils.errors import HarnessError
from utils.run_folder import is_run_folder, run_folder_above

TMP_SUFFIX = ".tmp"  # our temporaries: .<name>.<random>.tmp beside the target


class WriteError(HarnessError):
    """A file cannot or may not be written; the message names it and the fix."""


def owns(relative: Path, patterns: tuple[str, ...]) -> bool:
    """Whether a path relative to a run folder is one of `patterns` (matched whole, part by part)."""
    parts = relative.parts
    return any(
        len(parts) == len(Path(p).parts) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, Path(p).parts))
        for p in patterns
    )


def check_target(
    path: str | Path,
    what: str,
    *,
    inputs: Iterable[str | Path] = (),
    overwrite: bool = False,
    own: tuple[str, ...] = (),
) -> Path:
    """The resolved target if `path` may be written; WriteError naming it and the fix otherwise.
    `own`: the paths inside a run folder (relative to it, glob patterns) this command writes."""
    target = Path(path).resolve()
    for given in inputs:
        if given is not None and Path(given).exists() and Path(given).resolve() == target:
            raise WriteError(
                f"{what} {path} is also this command's input ({given}): it would be replaced by "
                f"its own output; write to another file"
            )
    if target.is_dir():
        raise WriteError(f"{what} {path} is a folder; give a file name")
    run = run_folder_above(target.parent)
    if run is not None and not owns(target.relative_to(run), own):
        raise WriteError(
            f"{what} {path} is inside the run folder {run}, where only the harness writes its own "
            f"files; write it elsewhere"
        )
    if target.exists() and not overwrite:
        raise WriteError(f"{what} {path} exists; pass --overwrite to replace it, or choose another file")
    return target


def check_output_folder(path: str | Path, what: str, own: tuple[str, ...] = ()) -> Path:
    """A folder a command fills with its outputs: never a run folder itself, nor a folder inside one
    other than those it owns (`own`: names relative to the run folder, glob patterns)."""
    folder = Path(path).resolve()
    if is_run_folder(folder):
        raise WriteError(
            f"{what} {path} is a run folder: its outputs would mix with the run's files; "
            f"give a folder of its own (e.g. {Path(path) / 'test_mine'})"
        )
    run = run_folder_above(folder.parent)
    if run is not None:
        if not owns(folder.relative_to(run), own):
            raise WriteError(
                f"{what} {path} is inside the run folder {run}, where only the harness writes its "
                f"own files; use {run / 'test_<name>'} or a folder outside the run"
            )
    return folder


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporaries a killed write left in `folder`: ours (.<name>.<x>.tmp) and Ignite's
    checkpoint temporaries (tmp*.pt / tmp*)."""
    removed = []
    if not Path(folder).is_dir():
        return removed
    for entry in Path(folder).iterdir():
        name = entry.name
        ours = name.startswith(".") and name.endswith(TMP_SUFFIX)
        ignite = name.startswith("tmp") and entry.is_file()
        if (ours or ignite) and entry.is_file():
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def describe_os_error(e: OSError, path: Path) -> str:
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"cannot write {path}: {reason} (free some space or write elsewhere); nothing partial was left"
    return f"cannot write {path}: {reason}; nothing partial was left"


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


@contextlib.contextmanager
def atomic_output(path: str | Path, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator:
    """Open a temporary beside `path` for writing; on success it replaces `path` in one rename, on any
    error it is removed (an OSError becomes one WriteError line naming `path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({"encoding": encoding, "newline": ""} if "b" not in mode else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes it private (0600); outputs are as readable as any file
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise WriteError(describe_os_error(e, path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_output(path) as f:
        f.write(text)


def atomic_save(obj, path: str | Path) -> None:
    """torch.save through a temporary (torch reports a full disk as a RuntimeError, not an OSError)."""
    import torch

    try:
        with atomic_output(path, "wb", encoding=None) as f:
            torch.save(obj, f)
    except RuntimeError as e:
        raise WriteError(
            f"cannot write {path}: {str(e).splitlines()[0]} (disk full?); nothing partial was left"
        ) from None
