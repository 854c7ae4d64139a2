"""Every file a command writes goes through here: one guard that says whether the target may be
written at all, and atomic writes (a temporary in the same folder, then a rename), so a failed or
killed write never leaves a partial file and never destroys what was there.

The guard (`check_target`): resolved through symlinks, a target is never one of the command's
inputs, never an existing file without `--overwrite`, never a run folder or a file inside a run
folder that the command does not own (`own` names what it may write there, e.g. average.py's
`checkpoints/averaged_*.pt`, test.py's `test/`), never a device, FIFO, socket, /proc or /sys file or a
read-only place (unless the command streams there by design: `stream`), never a folder or a dangling
link. A link is written through: what it points to is replaced, never the link itself.

What a command claims as its own (`written_by`): it records each file's content hash in its folder's
`WRITTEN_RECORD` when it writes it (`record_written`), and `--overwrite` replaces only a file whose
hash still matches; a file it never wrote, or one edited since, is the user's and refused.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import glob
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Optional

from utils.errors import WriteError
from utils.run_folder import IGNITE_TEMPORARY, OUR_TEMPORARY, is_run_folder, matches, run_folder_above
from utils.user_paths import check_home_expanded
from utils.write_points import write_point

TMP_SUFFIX = ".tmp"  # our temporaries: .<name>.<random>.tmp beside the target
WRITTEN_RECORD = ".harness_written.json"  # per folder: {file name: {"sha256": ..., "by": command}}
PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"))  # the kernel's files: never replaced by an output


def owns(relative: Path, patterns: tuple[str, ...]) -> bool:
    """Whether a path relative to a run folder is one of `patterns` (matched whole, part by part)."""
    return matches(relative, patterns)


def check_target(
    path: str | Path,
    what: str,
    *,
    inputs: Iterable[str | Path] = (),
    overwrite: bool = False,
    own: tuple[str, ...] = (),
    stream: bool = False,
    written_by: Optional[str] = None,
) -> Path:
    """The resolved target if `path` may be written (write there, not to `path`: a link is written
    through); WriteError naming it and the fix otherwise. `own`: the paths inside a run folder
    (relative to it, glob patterns) this command writes. `stream`: the command writes into a device or
    pipe by design (opened, not replaced), so one is accepted as it is. `written_by`: --overwrite
    replaces only a file this command recorded writing (`record_written`) and nobody edited since."""
    check_file_name(path, what)
    target = followed_link(path, what)
    for given in inputs:
        if given is not None and Path(given).exists() and Path(given).resolve() == target:
            raise WriteError(
                f"{what} {path} is also this command's input ({given}): it would be replaced by "
                f"its own output; write to another file"
            )
    if target.is_dir():
        raise WriteError(f"{what} {path} is a folder; give a file name")
    if stream and special_kind(target):
        return target
    check_ordinary_place(target, path, what)
    run = run_folder_above(target.parent)
    if run is not None and not owns(target.relative_to(run), own):
        raise WriteError(
            f"{what} {path} is inside the run folder {run}, where only the harness writes its own "
            f"files; write it elsewhere"
        )
    if target.exists() and not overwrite:
        raise WriteError(f"{what} {path} exists; pass --overwrite to replace it, or choose another file")
    if target.exists() and written_by:
        check_written_by(target, path, what, written_by)
    return target


def check_file_name(path: str | Path, what: str) -> None:
    """A file name, not a folder: a path ending in `/` names a folder even when none exists yet."""
    check_home_expanded(path, what)
    if str(path).endswith(("/", os.sep)) or Path(path).is_dir():
        raise WriteError(f"{what} {path} is a folder; give a file name")


def followed_link(path: str | Path, what: str) -> Path:
    """`path` resolved through links; a link to nothing is refused (writing through it would create
    a file where it points, writing over it would lose the link)."""
    given = Path(path)
    if given.is_symlink() and not given.exists():
        raise WriteError(
            f"{what} {path} is a link to {os.readlink(given)}, which does not exist; point the link "
            f"at an existing file, remove it, or give another file name"
        )
    return given.resolve()


def special_kind(target: Path) -> Optional[str]:
    """What `target` is when it exists and is neither a regular file nor a folder (None otherwise)."""
    try:
        mode = target.stat().st_mode
    except OSError:
        return None
    kinds = {
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISFIFO: "a named pipe (FIFO)",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), None)


def check_ordinary_place(target: Path, path: str | Path, what: str) -> None:
    """Outputs are regular files in writable folders: never a device, FIFO or socket (an atomic
    write would replace it with a regular file), never the kernel's /proc or /sys, never a
    read-only filesystem."""
    kind = special_kind(target)
    if kind:
        raise WriteError(f"{what} {path} is {kind} ({target}), not a regular file; give a file name")
    if any(target == fs or fs in target.parents for fs in PSEUDO_FILESYSTEMS):
        raise WriteError(f"{what} {path} is a file of the kernel ({target}), not a place for outputs; give a file name")
    existing = next(folder for folder in target.parents if folder.exists())
    if not existing.is_dir():
        raise WriteError(f"{what} {path}: {existing} is a file, not a folder; give a path in a folder")
    with contextlib.suppress(OSError):
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            raise WriteError(f"{what} {path} is on a read-only filesystem ({existing}); write it elsewhere")


def check_output_folder(path: str | Path, what: str, own: tuple[str, ...] = ()) -> Path:
    """A folder a command fills with its outputs: never a run folder itself, nor a folder inside one
    other than those it owns (`own`: names relative to the run folder, glob patterns), never a file,
    a device or a dangling link."""
    check_home_expanded(path, what)
    folder = followed_link(path, what)
    if folder.exists() and not folder.is_dir():
        raise WriteError(f"{what} {path} is a file, not a folder; give a folder name")
    check_ordinary_place(folder, path, what)
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


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def written_record(folder: Path) -> dict:
    """{file name: {"sha256", "by"}} of what commands recorded writing in `folder` ({} when none,
    or unreadable: then nothing there counts as the harness's, so nothing is replaced on a guess)."""
    try:
        record = json.loads((Path(folder) / WRITTEN_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def record_written(paths: Iterable[Path], by: str, forget: Iterable[Path] = ()) -> None:
    """Record the content hash of each file in `paths` as written by `by` (in its folder's
    WRITTEN_RECORD), and drop the entries of `forget` (files removed)."""
    folders: dict[Path, tuple[list[Path], list[Path]]] = {}
    for path in paths:
        folders.setdefault(Path(path).parent, ([], []))[0].append(Path(path))
    for path in forget:
        folders.setdefault(Path(path).parent, ([], []))[1].append(Path(path))
    for folder, (written, removed) in folders.items():
        record = written_record(folder)
        record.update({p.name: {"sha256": file_sha256(p), "by": by} for p in written})
        for p in removed:
            record.pop(p.name, None)
        atomic_write_text(folder / WRITTEN_RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")


def is_unchanged_output(path: Path, by: str) -> bool:
    """Whether `path` is a file `by` recorded writing, as it wrote it."""
    entry = written_record(Path(path).parent).get(Path(path).name)
    return isinstance(entry, dict) and entry.get("by") == by and entry.get("sha256") == file_sha256(path)


def check_written_by(target: Path, path: str | Path, what: str, by: str) -> None:
    """--overwrite replaces a file only if `by` wrote it and nobody edited it since."""
    recorded = written_record(target.parent)
    entry = recorded.get(target.name)
    record = target.parent / WRITTEN_RECORD
    if not recorded and record.is_file():
        raise WriteError(
            f"{what} {path} exists and {record}, the record of what {by} wrote there, is unreadable "
            f"(damaged?), so nothing there counts as {by}'s and --overwrite leaves it alone: move the "
            f"earlier outputs away or choose another {what}"
        )
    if not isinstance(entry, dict) or entry.get("by") != by:
        raise WriteError(
            f"{what} {path} exists and was not written by {by}, so --overwrite leaves it alone: move it "
            f"away or choose another {what}"
        )
    if entry.get("sha256") != file_sha256(target):
        raise WriteError(f"{what} {path} was edited since {by} wrote it: move it away or choose another {what}")


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporaries a killed write left in `folder`: ours (.<name>.<x>.tmp) and Ignite's
    checkpoint temporaries (tempfile's tmpXXXXXXXX), never a user's file that merely starts with tmp."""
    removed = []
    if not Path(folder).is_dir():
        return removed
    for entry in Path(folder).iterdir():
        temporary = any(fnmatch.fnmatchcase(entry.name, p) for p in (OUR_TEMPORARY, IGNITE_TEMPORARY))
        if temporary and entry.is_file():
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def remove_own_temporaries(targets: Iterable[Path]) -> list[Path]:
    """Delete the temporaries a killed write of these very outputs left beside them (.<name>.<x>.tmp
    of atomic_output): the next run of the command that writes them cleans up after the killed one."""
    removed = []
    for target in targets:
        target = Path(target)
        if not target.parent.is_dir():
            continue
        for entry in target.parent.glob(f".{glob.escape(target.name)}.*{TMP_SUFFIX}"):
            if entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def describe_os_error(e: OSError, path: Path) -> str:
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"cannot write {path}: {reason} (free some space or write elsewhere); nothing partial was left"
    return f"cannot write {path}: {reason}; nothing partial was left"


def user_mode(folder: bool = False) -> int:
    """The mode a new file (folder) of the user's gets now: 0666 (0777) less the umask, read at each
    call (a process may change its umask after this module is imported)."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if folder else 0o666) & ~umask


@contextlib.contextmanager
def atomic_output(
    path: str | Path, mode: str = "w", encoding: Optional[str] = "utf-8", replace: bool = True
) -> Iterator:
    """Open a temporary beside `path` for writing; on success it replaces `path` in one rename, on any
    error it is removed (an OSError becomes one WriteError line naming `path`). A link is written
    through (what it points to is replaced); a device, FIFO or socket is never replaced by a file.
    `replace=False` (no --overwrite): published only if `path` is still absent then (a link, which
    fails if it exists), so a second command that checked at the same time never replaces the first's."""
    path = followed_link(path, "output") if Path(path).is_symlink() else Path(path)
    if special_kind(path):
        raise WriteError(f"cannot write {path}: it is {special_kind(path)}, not a regular file; give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({"encoding": encoding, "newline": ""} if "b" not in mode else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, user_mode())  # mkstemp makes it private (0600); outputs are as readable as any file
        write_point("written", Path(tmp))
        if replace:
            os.replace(tmp, path)
        else:
            publish_if_absent(Path(tmp), path)
        write_point("renamed", path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise WriteError(describe_os_error(e, path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def publish_if_absent(tmp: Path, path: Path) -> None:
    """Rename `tmp` to `path` unless `path` exists by then (WriteError naming it)."""
    appeared = WriteError(
        f"--output {path} appeared while this command ran (another command wrote it): left as it is; "
        f"pass --overwrite to replace it, or choose another file"
    )
    try:
        os.link(tmp, path)  # atomic, and fails where `path` exists
    except FileExistsError:
        raise appeared from None
    except OSError:  # a file system without hard links (FAT, some network ones): check, then rename
        if path.exists():
            raise appeared from None
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_output(path) as f:
        f.write(text)


def atomic_save(obj, path: str | Path, replace: bool = True) -> None:
    """torch.save through a temporary (torch reports a full disk as a RuntimeError, not an OSError);
    `replace=False`: published only where `path` is still absent (atomic_output)."""
    import torch

    try:
        with atomic_output(path, "wb", encoding=None, replace=replace) as f:
            torch.save(obj, f)
    except RuntimeError as e:
        raise WriteError(
            f"cannot write {path}: {str(e).splitlines()[0]} (disk full?); nothing partial was left"
        ) from None
