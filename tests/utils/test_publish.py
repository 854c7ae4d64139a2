"""Sets published whole (utils/publish.py), unit by unit: a set appears at once with the files it drops
gone, an exception publishes nothing, a journal left by a kill is rolled forward by the next writer
or reader, and a kill before the journal leaves only the command's own leftovers, which it clears.
(Kills of the real commands at every write point: tests/guarantees/test_crash_consistency.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utils.publish import OutputSet, clear_leftovers, finish_publishing, journal_file, pending_in, staging_folder


def files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_set_replaces_the_earlier_one_whole_and_drops_what_it_no_longer_has(tmp_path: Path) -> None:
    place = tmp_path / "run" / "test"
    (place / "concat" / "k8").mkdir(parents=True)
    (place / "scores.json").write_text("old")
    (place / "concat" / "k8" / "hypotheses.txt").write_text("old k8")
    with OutputSet(place, "compare.py") as out:
        (out.staged_folder() / "scores.json").write_text("new")
        (out.staged_folder() / "hypotheses.txt").write_text("new hyps")
        published = out.publish(drops=[place / "scores.json", place / "concat" / "k8" / "hypotheses.txt"])
    assert files(tmp_path / "run") == {"test/hypotheses.txt": "new hyps", "test/scores.json": "new"}
    assert published == [place / "hypotheses.txt", place / "scores.json"]
    assert not (place / "concat").exists()  # emptied folders of the earlier set go too
    assert not staging_folder(place).exists() and not journal_file(place).exists()


def test_an_exception_publishes_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    place = tmp_path / "test"
    place.mkdir()
    (place / "scores.json").write_text("old")
    with pytest.raises(RuntimeError):
        with OutputSet(place, "compare.py") as out:
            (out.staged_folder() / "scores.json").write_text("half")
            raise RuntimeError("decoding failed")
    assert files(tmp_path) == {"test/scores.json": "old"}


def test_a_journal_left_by_a_kill_is_rolled_forward(tmp_path: Path) -> None:
    """Killed after the journal and one rename: the next `finish_publishing` (a reader, or the same
    command's `OutputSet`) does the rest, and the record callback sees the whole set."""
    place = tmp_path / "test"
    staged = staging_folder(place) / "test"
    staged.mkdir(parents=True)
    place.mkdir()
    (place / "old.txt").write_text("dropped")
    (staged / "b.txt").write_text("b")
    (place / "a.txt").write_text("a")  # already renamed before the kill
    moves = [[str(staged / "a.txt"), str(place / "a.txt")], [str(staged / "b.txt"), str(place / "b.txt")]]
    journal_file(place).write_text(json.dumps({"moves": moves, "removes": [str(place / "old.txt")]}))
    assert pending_in(tmp_path) == [place]
    seen = []
    assert finish_publishing(place, lambda moved, removed: seen.append((moved, removed))) is True
    assert files(tmp_path) == {"test/a.txt": "a", "test/b.txt": "b"}
    assert seen == [([place / "a.txt", place / "b.txt"], [place / "old.txt"])]
    assert pending_in(tmp_path) == [] and finish_publishing(place) is False


def test_leftovers_of_a_kill_before_the_journal_are_cleared(tmp_path: Path) -> None:
    place = tmp_path / "test"
    (staging_folder(place) / "test").mkdir(parents=True)
    (staging_folder(place) / "test" / "scores.json").write_text("never published")
    half_journal = tmp_path / f".{journal_file(place).name}.x1y2.tmp"  # an atomic write's temporary
    half_journal.write_text("{")
    clear_leftovers(place)
    assert not staging_folder(place).exists() and not half_journal.exists() and not place.exists()


def test_a_prefix_set_publishes_beside_other_files(tmp_path: Path) -> None:
    """compare.py's summary is a set of names in a folder it shares: the files of the set are
    published, the others stay."""
    (tmp_path / "notes.md").write_text("yours")
    with OutputSet(tmp_path / "summary", "compare.py") as out:
        (out.staging / "summary.md").write_text("table")
        (out.staging / "summary.csv").write_text("rows")
        out.publish()
    assert files(tmp_path) == {"notes.md": "yours", "summary.csv": "rows", "summary.md": "table"}


def half_published(run: Path) -> Path:
    """A run whose test set was stopped after its journal and its first move (the earlier scores still
    beside the new hypotheses)."""
    place = run / "test"
    place.mkdir(parents=True)
    (place / "scores.json").write_text("old scores")
    (place / "hypotheses.txt").write_text("old hyps")
    stage = staging_folder(place) / "test"
    stage.mkdir(parents=True)
    (stage / "scores.json").write_text("new scores")
    (place / "hypotheses.txt").write_text("new hyps")  # (its move done before the kill)
    plan = {
        "moves": [
            [str(stage / "hypotheses.txt"), str(place / "hypotheses.txt")],
            [str(stage / "scores.json"), str(place / "scores.json")],
        ],
        "removes": [],
    }
    journal_file(place).write_text(json.dumps(plan))
    return place


def test_a_reader_finishes_a_set_a_stopped_writer_left_or_refuses_in_one_line(tmp_path: Path, monkeypatch) -> None:
    """The readers' rule (settle): nobody holds the run and it is writable: finished, the new set
    whole; a writer holds the run's lock: refused, naming it; a folder the reader cannot write:
    refused, naming the command that finishes it; a damaged journal is not followed."""
    from utils.errors import HarnessError
    from utils.publish import settle, settle_run
    from utils.run_folder import RunLock

    place = half_published(tmp_path / "run")
    settle_run(place.parent, "compare.py")
    assert files(place) == {"hypotheses.txt": "new hyps", "scores.json": "new scores"}
    assert pending_in(place.parent) == [] and not staging_folder(place).exists()

    place = half_published(tmp_path / "held")
    with RunLock(place.parent, "test.py --run held"):
        import multiprocessing

        def try_settle(queue) -> None:  # another process: this one holds the lock
            RunLock._held_here = set()  # (what the fork copied of this process's locks is not the child's)
            try:
                settle_run(place.parent, "compare.py")
                queue.put("finished")
            except HarnessError as e:
                queue.put(str(e))

        queue = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(target=try_settle, args=(queue,))
        child.start()
        child.join()
        said = queue.get()
    assert said.startswith(f"{place} is being published by PID ") and said.endswith("run compare.py again when it ends")
    assert journal_file(place).exists()  # untouched

    place = half_published(tmp_path / "readonly")
    import utils.publish

    monkeypatch.setattr(utils.publish.os, "access", lambda path, mode: Path(path) != place.parent)
    with pytest.raises(
        HarnessError, match=r"left half published by a test.py that was stopped, and compare.py cannot finish it"
    ):
        settle_run(place.parent, "compare.py")
    monkeypatch.undo()
    assert journal_file(place).exists()

    damaged = tmp_path / "damaged" / "test"
    damaged.mkdir(parents=True)
    journal_file(damaged).write_text("{}")
    assert settle(damaged, "compare.py", "test.py") and not journal_file(damaged).exists()


def test_two_finishers_of_one_journal_leave_the_same_set(tmp_path: Path) -> None:
    """A move whose staged file another finisher already moved is done, not an error."""
    from utils.publish import _move

    staged, target = tmp_path / "staged", tmp_path / "out" / "target"
    _move(staged, target)  # (nothing staged: someone else moved it)
    assert not target.exists()
    staged.write_text("x")
    _move(staged, target)
    assert target.read_text() == "x" and not staged.exists()


def test_a_stop_delivered_to_another_thread_still_waits_for_the_publication() -> None:
    """Issue 67: a SIGTERM delivered to a worker thread (a progress bar's, TensorBoard's) ran the stop
    handler in the main thread in the middle of a publication, since only the main thread blocked it.
    Held now: the handler runs once the block is done, as it would have."""
    import signal
    import threading
    import time

    from utils.publish import stops_held

    seen: list[str] = []

    def handler(signum, frame) -> None:
        seen.append("stopped")

    before = signal.signal(signal.SIGTERM, handler)
    try:
        worker_ready, done = threading.Event(), threading.Event()

        def worker() -> None:
            worker_ready.set()
            done.wait(10)

        thread = threading.Thread(target=worker)
        thread.start()
        worker_ready.wait(10)
        with stops_held():
            signal.pthread_kill(thread.ident, signal.SIGTERM)  # to the worker thread, not this one
            for _ in range(50):  # the interpreter checks for handlers between bytecodes: give it many
                time.sleep(0.001)
            seen.append("published")
        done.set()
        thread.join()
    finally:
        signal.signal(signal.SIGTERM, before)
    assert seen == ["published", "stopped"]
