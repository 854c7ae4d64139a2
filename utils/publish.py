"""Sets of files published together: a test folder (test.py) and a summary set (compare.py) are read
as one result, so a kill, a failure or a reader in the middle never sees part of a new set beside
part of the old one.

How (a journal, rolled forward): the command writes the whole set into a staging folder beside it
(`.<name>.staging/`, the set's own layout inside). Then it publishes: a journal
(`.<name>.publishing.json`, written atomically) lists every move (a staged file to its place) and
every file of the earlier set that the new one drops, named relative to its own folder (it travels
with it: a moved folder's journal is finished where it now is, a copy's in the copy, never outside
the folder; utils/journal.py); the moves are renames in the same folder
tree, the drops unlinks; then the journal is deleted and the staging folder with it.
- killed before the journal exists: the earlier set stands untouched; the staging folder is the
  command's own leftover, removed by its next run (`OutputSet.__enter__`);
- killed after: whoever touches the set next (the same command again, or a reader:
  `settle`) completes the journal, so what stands is the new set whole. The readers' rule
  (`settle`): a reader finishes a pending journal when no writer holds the folder's lock and the
  folder can be written, else it refuses in one line naming who holds it, or the command that
  finishes it; finishing is idempotent, so two finishers at once leave the same set.
POSIX has no rename of a folder over a non-empty folder, and a summary set shares its folder with
other files, so a journal of renames, not a directory swap, is the one mechanism for both.

Crash tests (tests/guarantees/test_crash_consistency.py) kill a command at each of its write points
(utils/write_points.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from utils.errors import HarnessError
from utils.files import atomic_write_text, remove_own_temporaries
from utils.journal import journal_text, read_plan
from utils.run_folder import JOURNAL_SUFFIX, STAGING_SUFFIX, RunLock
from utils.run_log import log
from utils.write_points import write_point


def staging_folder(place: Path) -> Path:
    return place.parent / f".{place.name}{STAGING_SUFFIX}"


def journal_file(place: Path) -> Path:
    return place.parent / f".{place.name}{JOURNAL_SUFFIX}"


def pending_in(folder: Path) -> list[Path]:
    """The sets in `folder` whose publication has begun and not ended (their journals' places)."""
    return sorted(
        p.with_name(p.name[1 : -len(JOURNAL_SUFFIX)]) for p in Path(folder).glob(f".*{JOURNAL_SUFFIX}") if p.is_file()
    )


def _move(staged: Path, target: Path) -> None:
    """Rename `staged` onto `target` (written through a link to `target`'s resolved place); across
    file systems (a link elsewhere) through a copy beside the target, then a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(staged, target)
    except FileNotFoundError:
        if staged.exists():
            raise
        return  # another finisher of the same journal moved it first
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        beside = target.with_name(f".{target.name}.moving.tmp")
        shutil.copyfile(staged, beside)
        os.replace(beside, target)
        staged.unlink()


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends (they stop the command right after it): a
    publication, once its journal is written, is never left half done by a stop. The handlers are
    swapped for one that only records the signal, since a signal sent to the process may be delivered
    to any of its threads (a progress bar's, TensorBoard's) and Python then runs the handler in the
    main thread, wherever it is: blocking it in the main thread alone does not hold it. After the
    block the first signal recorded is handled as it would have been."""
    if threading.current_thread() is not threading.main_thread():
        yield  # (only the main thread may set handlers; it is the one that publishes)
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if caught:
            _deliver(caught[0], before[caught[0]])


def _deliver(signum: int, handler) -> None:
    """Handle a held signal as the handler in place before would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)  # the default action (the handler is back in place)


def finish_publishing(
    place: Path, on_published: Optional[Callable[[list[Path], list[Path]], None]] = None, writer: str = "its command"
) -> bool:
    """Complete a publication a kill interrupted (its journal is there): do the moves whose staged
    file is still there and the removals, then delete the journal and the staging folder. Returns
    whether there was one. `on_published(moved targets, removed)` runs before the journal goes (a
    record of what was written: redone if a kill comes in between). A stop waits until it is done.
    A journal is followed where it now is, never outside its folder (utils/journal.py: a folder
    moved or copied since); one that cannot be is refused (HarnessError naming `writer`)."""
    with stops_held():
        return _finish(place, on_published, writer)


def _finish(place: Path, on_published: Optional[Callable[[list[Path], list[Path]], None]], writer: str) -> bool:
    journal = journal_file(place)
    try:
        plan = read_plan(journal, staging_folder(place), writer)
    except FileNotFoundError:  # (no journal; a place under a file is refused elsewhere)
        return False
    if plan is not None:  # (None: damaged, not ours to follow)
        moves, removed = plan
        targets = [target for _, target in moves]
        for staged, target in moves:
            if staged.is_file():
                _move(staged, target)
                write_point("published", target)
        for path in removed:
            if path.is_file() or path.is_symlink():
                path.unlink()
                write_point("dropped", path)
        for folder in sorted({p.parent for p in removed}, key=lambda p: -len(p.parts)):
            _remove_if_empty(folder, stop=place.parent)
        if on_published is not None:
            on_published(targets, removed)
    journal.unlink(missing_ok=True)
    write_point("journal removed", journal)
    shutil.rmtree(staging_folder(place), ignore_errors=True)
    return True


def settle(place: Path, reader: str, writer: str, lock_folder: Optional[Path] = None) -> bool:
    """The readers' rule for the set at `place` (a run's test folder, an export, a summary prefix): a
    publication a kill interrupted is finished here, when no writer holds `lock_folder`'s lock (a run
    folder's RunLock) and `place`'s folder can be written; otherwise refused in one line (HarnessError)
    naming who holds the lock, or the `writer` command that finishes it. Returns whether it finished one."""
    if not journal_file(place).is_file():
        return False
    who = RunLock.holder(lock_folder) if lock_folder is not None else None
    if who and not RunLock.held_here(lock_folder):
        raise HarnessError(f"{place} is being published by {who}: run {reader} again when it ends")
    if not os.access(place.parent, os.W_OK | os.X_OK):
        raise HarnessError(
            f"{place} was left half published by a {writer} that was stopped, and {reader} cannot finish it "
            f"({place.parent} is not writable here): run the same {writer} command where it can write, or ask "
            f"the folder's owner to"
        )
    finish_publishing(place, writer=writer)
    log(f"{reader}: completed {place}, which a stopped {writer} had left half published")
    return True


ARCHIVE_PACK = "tools/archive.py pack"  # the writer of a run folder as a whole (an archived run)


def settle_run(run: Path, reader: str) -> None:
    """`settle` a run folder under the run's lock rule: the run itself, which a stopped
    `tools/archive.py pack` left half published into the archive (its journal beside the run), then
    each of its sets (its test folders, test.py's)."""
    settle(run, reader, ARCHIVE_PACK, lock_folder=run)
    for place in pending_in(run):
        settle(place, reader, "test.py", lock_folder=run)


def clear_orphans(folder: Path) -> list[Path]:
    """Remove the staging folders in `folder` that have no journal (a writer killed before publishing:
    never a result), as the next writer of each set would; for a command that writes the folder's sets
    without entering each (a sweep skipping a finished run). Returns what it removed."""
    staged = [p for p in Path(folder).glob(f".*{STAGING_SUFFIX}") if p.is_dir()]
    places = [p.with_name(p.name[1 : -len(STAGING_SUFFIX)]) for p in staged]
    orphans = [place for place in places if not journal_file(place).exists()]
    for place in orphans:
        clear_leftovers(place)
    return [staging_folder(place) for place in orphans]


def _remove_if_empty(folder: Path, stop: Path) -> None:
    """Remove `folder` and its parents up to `stop` while they are empty (an old concat/k8/)."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def clear_leftovers(place: Path) -> None:
    """Remove what a killed command left of an unpublished set at `place` (no journal: never a
    result): its staging folder and a journal it was still writing (the atomic write's temporary).
    Called by the command that writes `place`, holding its lock where it has one."""
    shutil.rmtree(staging_folder(place), ignore_errors=True)
    remove_own_temporaries([journal_file(place)])


class OutputSet:
    """The set published as `place` (a folder, or a prefix of names in its parent): write every
    file into the staging folder (laid out as `place`'s parent), then `publish(...)`; an exception
    publishes nothing. `writer`: the command writing it, named in a refusal to finish a publication a
    stopped one left (utils/journal.py).

        with OutputSet(run / "test", "test.py") as out:
            write(out.staged_folder() / "scores.json", ...)   # published as run/test/scores.json
            out.publish(drops=earlier_files)
    """

    def __init__(
        self, place: Path, writer: str, on_published: Optional[Callable[[list[Path], list[Path]], None]] = None
    ):
        self.place = Path(place)
        self.writer = writer
        self.staging = staging_folder(self.place)
        self.on_published = on_published

    def __enter__(self) -> "OutputSet":
        finish_publishing(self.place, self.on_published, self.writer)  # a publication a kill interrupted: completed
        clear_leftovers(self.place)
        self.staging.mkdir(parents=True)
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if not journal_file(self.place).exists():  # (a journal: its staged files are the set, kept to finish)
            shutil.rmtree(self.staging, ignore_errors=True)  # after an error, or a set left unpublished

    def staged_folder(self) -> Path:
        """The staging twin of a folder set's `place` (its files keep their layout inside)."""
        folder = self.staging / self.place.name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def publish(self, drops: Iterable[Path] = (), targets: Optional[dict[Path, Path]] = None) -> list[Path]:
        """Publish every file written in the staging folder; `drops`: files of the earlier set that
        the new one does not have (removed at the same moment). `targets` maps a staged file to a
        place other than its mirror (a link's resolved target: one outside the folder is followed only
        where the journal was written, utils/journal.py). Returns the published paths."""
        targets = targets or {}
        moves = []
        for staged in sorted(p for p in self.staging.rglob("*") if p.is_file()):
            target = targets.get(staged) or self.place.parent / staged.relative_to(self.staging)
            with open(staged, "rb") as f:
                os.fsync(f.fileno())  # on disk before the journal points at it
            moves.append((staged, Path(target)))
        published = {t for _, t in moves}
        journal = journal_text(self.place.parent, moves, [Path(p) for p in drops if Path(p) not in published])
        with stops_held():  # from the journal on, a stop waits until the set is published
            atomic_write_text(journal_file(self.place), journal)
            _finish(self.place, self.on_published, self.writer)
        return sorted(published)


class SetLock(RunLock):
    """One writer per output set that is not a run folder (compare.py's summary prefix `place`): the
    same OS lock, on .<name>.lock beside the set (its holder in .<name>.lock.pid)."""

    def __init__(self, place: Path, command: str) -> None:
        super().__init__(Path(place).parent, command)
        self.place = Path(place)

    def files(self) -> tuple[Path, Path]:
        return self.run_dir / f".{self.place.name}.lock", self.run_dir / f".{self.place.name}.lock.pid"

    def in_use(self, who: str) -> str:
        return f"{self.place} is being written by another process ({who}): wait for it to end, then run again"
