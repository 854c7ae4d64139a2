"""A command killed at any moment leaves its outputs whole or absent, and the same command finishes
them (utils/publish.py). Deterministic, not timed: `HARNESS_KILL_AT=N` makes the process SIGKILL
itself at its N-th write point (utils/write_points.py), in a forked copy of this process
(no interpreter start, no torch import per kill; each input's plots rendered once: tests/plots_once.py).
After each death:
- every published output set is exactly one call's: the earlier set or the new one, byte for byte
  (scores.json compared without its timings), never a mix and never unparseable;
- the same command again finishes with exit 0 and the result of an uninterrupted call.

`make test` kills at every write point of each command; the variant marked `sampled` at a sample of
them (the journal's, the first and the last rename or drop), a subset of those cases for a quick run
by hand (`pytest -m sampled tests/guarantees`), which `make test` leaves out (pytest.ini).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import plots_once
import pytest
from helpers import copy_of
from in_process import run_in_process

from utils.journal import read_plan
from utils.publish import journal_file, pending_in, staging_folder
from utils.run_folder import JOURNAL_SUFFIX

TIMINGS = ("translate_seconds", "sentences_per_second", "seconds")


def without_timings(value):
    """A parsed scores.json without the wall-clock figures (at any depth)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def in_forked_process(args: list[str], kill_at: int | None = None, log: Path | None = None) -> int:
    """Exit code of `python args...` run in a fork of this process (-9: killed at write point `kill_at`)."""
    plots = plots_once.cache()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            import artifacts.ctranslate2_conversion
            import commands.export
            import utils.write_points

            utils.write_points._write_points = 0
            plots_once.render_plots_once(plots)
            for module in (commands.export, artifacts.ctranslate2_conversion):  # (the checkout may change meanwhile:
                module.harness_commit = lambda: "the harness's commit"  # an export records it)
            os.environ.pop("HARNESS_KILL_AT", None)
            if kill_at is not None:
                os.environ["HARNESS_KILL_AT"] = str(kill_at)
            if log is not None:
                os.environ["HARNESS_WRITE_LOG"] = str(log)
            proc = run_in_process(args)
            code = proc.returncode
            if code:  # into the test's captured output (file descriptor 2 is pytest's capture)
                os.write(2, proc.stderr[-3000:].encode())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def write_points(args: list[str], log: Path) -> list[str]:
    """The write points of one uninterrupted call (its lines of HARNESS_WRITE_LOG)."""
    log.unlink(missing_ok=True)
    assert in_forked_process(args, log=log) == 0
    return log.read_text().splitlines()


def sample(points: list[str], every: bool) -> list[int]:
    """Which write points to kill at: all of them, or one of each kind: the journal written (before
    its rename: nothing published yet) and renamed (the commit point), the first and the last
    rename or drop of the publication."""
    if every:
        return list(range(1, len(points) + 1))
    kinds = [line.split("\t")[1:] for line in points]
    journal = [n for n, (what, path) in enumerate(kinds, 1) if JOURNAL_SUFFIX in Path(path).name]
    publication = [n for n, (what, _) in enumerate(kinds, 1) if what in ("published", "dropped")]
    return sorted({*journal, publication[0], publication[-1]})


def comparable(folder: Path, run: Path, names: str = "*") -> dict[str, object]:
    """The set's files as one call left them: bytes, and scores.json parsed without its timings
    (and its run folder's path: the same test of copies of one run is the same result)."""
    found = {}
    for path in sorted(folder.rglob(names)):
        if not path.is_file() or path.name.startswith("."):
            continue
        key = str(path.relative_to(folder))
        if path.name == "scores.json":
            scores = json.loads(path.read_text().replace(str(run), "RUN"))  # (unparseable: fails)
            found[key] = without_timings(scores)
        else:  # (a path of the folder compared, e.g. a summary naming its runs, as RUN)
            found[key] = path.read_bytes().replace(str(run).encode(), b"RUN")
    return found


def leftovers(folder: Path) -> list[str]:
    """What a killed command of the harness may leave beside its outputs (staging folders, journals,
    temporaries): its next run removes them."""
    patterns = (".*.staging", ".*.publishing.json", ".*.tmp")
    return sorted(str(p) for pattern in patterns for p in folder.rglob(pattern))


def differences(a: dict, b: dict) -> list[str]:
    """The files (and scores.json keys) where two sets differ: the message of a failed comparison."""
    keys = sorted(set(a) | set(b))
    found = [k for k in keys if k != "scores.json" and a.get(k) != b.get(k)]
    sa, sb = a.get("scores.json") or {}, b.get("scores.json") or {}
    return found + [f"scores.json:{k}" for k in sorted(set(sa) | set(sb)) if sa.get(k) != sb.get(k)]


def as_published(folder: Path, view: Path, names: str = "*") -> Path:
    """The set `names` in `folder` as its readers take it, copied to `view`: a publication whose
    journal was written is the new set (the journal is the commit point: readers refuse until the
    same command completes it, and that completion is checked apart), so its moves and drops are
    applied here. `names`: a prefix set's glob (compare.py's summary*), or every file of a folder set."""
    shutil.rmtree(view, ignore_errors=True)
    view.mkdir(parents=True)
    found = (folder.rglob("*") if names == "*" else folder.glob(names)) if folder.exists() else ()
    for path in found:
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts):
            (view / path.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, view / path.relative_to(folder))
    place = folder if names == "*" else folder / names.rstrip("*")
    if journal_file(place).exists():
        moves, removes = read_plan(journal_file(place), staging_folder(place), "its command")
        for staged, target in moves:
            if staged.exists():
                (view / target.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(staged, view / target.relative_to(folder))
        for dropped in removes:
            (view / dropped.relative_to(folder)).unlink(missing_ok=True)
    return view


def published_test_set(run: Path) -> dict:
    view = as_published(run / "test", run.parent / f"{run.name}.view")
    found = comparable(view, run)
    shutil.rmtree(view)
    return found


def summary_set_of(folder: Path) -> dict:
    view = as_published(folder, folder.parent / f"{folder.name}.view", "summary*")
    found = comparable(view, folder)
    shutil.rmtree(view)
    return found


@pytest.fixture(scope="module")
def untested(trained_run: Path, tmp_path_factory) -> Path:
    """The tiny trained run without any test/ folder."""
    run = copy_of(trained_run, tmp_path_factory.mktemp("crash") / "run")
    shutil.rmtree(run / "test", ignore_errors=True)
    return run


TEST_ARGS = ["--concat", "1", "2"]  # hypotheses, references, k = 1 and 2, teacher-forced files, scores


@pytest.fixture(scope="module")
def reference(untested: Path, tmp_path_factory) -> tuple[list[str], dict]:
    """test.py's write points on the tiny run, and the set an uninterrupted call publishes."""
    folder = tmp_path_factory.mktemp("reference")
    run = copy_of(untested, folder / "run")
    points = write_points(["test.py", "--run", str(run), *TEST_ARGS], folder / "writes.log")
    return points, published_test_set(run)


@pytest.mark.slow
def test_points(untested: Path, reference: tuple, tmp_path: Path, every: bool) -> None:
    """test.py killed at each write point, first into an untested run, then over an earlier test
    with other settings (--overwrite): the test folder is absent, the earlier set or the new one,
    and the same command again gives the uninterrupted result."""
    points, new = reference
    assert len(points) >= 20 and sum("published" in p for p in points) >= 10, points
    tested = copy_of(untested, tmp_path / "earlier")
    earlier_args = ["test.py", "--run", str(tested), "--concat", "1", "--set", "decoding.strategy=greedy"]
    assert in_forked_process(earlier_args) == 0
    assert set(published_test_set(tested)) != set(new)  # (no concat/k2/: a drop is part of the publication)

    for n in sample(points, every):
        if n in sample(points, every=False):  # into an untested run (the over-an-earlier-test case: every point)
            fresh = copy_of(untested, tmp_path / f"fresh{n}")
            args = ["test.py", "--run", str(fresh), *TEST_ARGS]
            assert in_forked_process(args, kill_at=n) == -9, n
            assert published_test_set(fresh) in ({}, new), ("mixed", points[n - 1])
            assert in_forked_process(args) == 0, n
            assert published_test_set(fresh) == new, differences(published_test_set(fresh), new)
            assert leftovers(fresh) == [], n
            shutil.rmtree(fresh)

        over = copy_of(tested, tmp_path / f"over{n}")  # tested with earlier_args
        earlier = published_test_set(over)  # (its scores.json names the copied run's checkpoint)
        args = ["test.py", "--run", str(over), "--overwrite", *TEST_ARGS]
        assert in_forked_process(args, kill_at=n) == -9, n
        assert published_test_set(over) in (earlier, new), ("mixed", points[n - 1])
        assert in_forked_process(args) == 0, n
        assert published_test_set(over) == new, differences(published_test_set(over), new)
        assert leftovers(over) == [], n
        shutil.rmtree(over)


# the sample: the fast tier's (`make test-fast`); every point: the slow tier's, which covers the sample's
# cases, so that `make test` (-m "not sampled") runs each test once, at every point
@pytest.fixture(
    params=[pytest.param(False, marks=pytest.mark.sampled), pytest.param(True, marks=pytest.mark.slow)],
    ids=["sample", "every"],
)
def every(request) -> bool:
    return request.param


def test_readers_never_read_a_half_published_test(untested: Path, reference: tuple, tmp_path: Path) -> None:
    """compare.py over a run whose test.py was killed after its journal (the commit point) and before
    its last move finishes the set first (nobody holds the run, and it can write it: the readers'
    rule, utils/publish.settle), then reads the whole new test set: what the uninterrupted test.py wrote."""
    run = copy_of(untested, tmp_path / "run")
    args = ["test.py", "--run", str(run), *TEST_ARGS]
    points, whole = reference
    first_move = next(n for n, line in enumerate(points, 1) if "\tpublished\t" in line)
    assert in_forked_process(args, kill_at=first_move + 1) == -9
    proc = run_in_process(["compare.py", str(run)])
    assert proc.returncode == 0, proc.stderr
    assert f"compare.py: completed {run / 'test'}, which a stopped test.py had left half published" in proc.stdout
    assert published_test_set(run) == whole and pending_in(run) == []


@pytest.mark.slow
def test_export_points(trained_run: Path, tmp_path: Path, every: bool) -> None:
    """export.py killed at each write point, into a new folder and over an earlier export with other
    settings (--overwrite): the folder is absent, the earlier export or the new one, and the same
    command again gives the uninterrupted export."""

    def export(folder: Path, *flags: str) -> list[str]:
        return ["export.py", "--run", str(trained_run), "--output", str(folder), *flags]

    reference = tmp_path / "reference"
    points = write_points(export(reference), tmp_path / "writes.log")
    new = comparable(reference, trained_run)
    earlier_flags = ("--overwrite", "--set", "decoding.strategy=greedy")
    assert in_forked_process(export(reference, *earlier_flags)) == 0
    earlier = comparable(reference, trained_run)
    assert earlier != new

    for n in sample(points, every):
        fresh = tmp_path / f"fresh{n}"
        assert in_forked_process(export(fresh), kill_at=n) == -9, n
        seen = comparable(as_published(fresh, tmp_path / "view"), trained_run)
        assert seen in ({}, new), (points[n - 1], differences(seen, new))
        assert in_forked_process(export(fresh)) == 0, n
        assert comparable(fresh, trained_run) == new, differences(comparable(fresh, trained_run), new)
        assert leftovers(tmp_path) == [], n  # (its staging folder is beside it)

        over = tmp_path / f"over{n}"
        shutil.copytree(reference, over)  # the greedy export
        assert in_forked_process(export(over, "--overwrite"), kill_at=n) == -9, n
        seen = comparable(as_published(over, tmp_path / "view"), trained_run)
        assert seen in (earlier, new), (points[n - 1], differences(seen, new))
        assert in_forked_process(export(over, "--overwrite")) == 0, n
        assert comparable(over, trained_run) == new, differences(comparable(over, trained_run), new)
        assert leftovers(tmp_path) == [], n


def test_a_reader_of_a_half_published_export_finishes_it_first(trained_run: Path, tmp_path: Path) -> None:
    """inference.py over an export whose export.py --overwrite was killed after its first move (the old
    weights beside the new model card): it completes the new export, then translates with it, as the
    uninterrupted export would (issue 67: it used to translate with the old weights silently)."""
    from helpers import one_error_line

    out = tmp_path / "export"
    assert (
        in_forked_process(
            ["export.py", "--run", str(trained_run), "--output", str(out), "--set", "decoding.strategy=greedy"]
        )
        == 0
    )
    again = ["export.py", "--run", str(trained_run), "--output", str(out), "--overwrite"]
    reference = tmp_path / "reference"
    shutil.copytree(out, reference)
    points = write_points([*again[:4], str(reference), "--overwrite"], tmp_path / "writes.log")
    new = comparable(reference, trained_run)
    first_move = next(n for n, line in enumerate(points, 1) if "\tpublished\t" in line)
    assert in_forked_process(again, kill_at=first_move) == -9
    assert journal_file(out).exists() and comparable(out, trained_run) != new  # a mixed folder on disk
    proc = run_in_process(["inference.py", "--model_path", str(out), "--src_text", "Bonjour."])
    assert proc.returncode == 0, one_error_line(proc)
    assert f"completed {out}, which a stopped export.py had left half published" in proc.stdout + proc.stderr
    assert comparable(out, trained_run) == new and not journal_file(out).exists()
    assert leftovers(tmp_path) == []


def test_a_sigterm_while_publishing_leaves_one_set_and_the_same_command_finishes(
    untested: Path, reference: tuple, tmp_path: Path
) -> None:
    """A SIGTERM (a scheduler's stop) is a stop, not a kill: at a staged write it publishes nothing
    (exit 4, one line saying to run the same command again); after the journal the earlier set is
    already replaced, and the same command finishes or finds it done, without --overwrite."""
    points, new = reference
    journal = next(n for n, line in enumerate(points, 1) if line.split("\t")[1] == "renamed" and JOURNAL_SUFFIX in line)
    for n in (1, journal + 1):
        run = copy_of(untested, tmp_path / f"run{n}")
        args = ["test.py", "--run", str(run), *TEST_ARGS]
        pid = os.fork()
        if pid == 0:
            code = 99
            try:
                import utils.write_points

                utils.write_points._write_points = 0
                os.environ.update(HARNESS_KILL_AT=str(n), HARNESS_KILL_SIGNAL="TERM")
                proc = run_in_process(args)
                code = proc.returncode
                Path(tmp_path / f"stderr{n}").write_text(proc.stderr)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 4, (tmp_path / f"stderr{n}").read_text()
        assert "run the same command again" in (tmp_path / f"stderr{n}").read_text()
        assert published_test_set(run) in ({}, new), points[n - 1]
        assert not list(run.glob(".*.staging"))  # a stop cleans its staging up (a kill leaves it to the next run)
        assert in_forked_process(args) == 0
        assert published_test_set(run) == new


@pytest.mark.slow
@pytest.mark.parametrize("command", ["inference.py", "average.py"])
def test_single_file_outputs_are_absent_or_whole(trained_run: Path, tmp_path: Path, command: str) -> None:
    """inference.py's translations and average.py's checkpoint are one file each, renamed into place
    whole: killed at any write point it is absent (the same command then writes it) or whole (the
    command had finished its work: the same command again says it exists, and changes nothing)."""
    source = tmp_path / "source.txt"
    source.write_text("Bonjour .\nMerci beaucoup .\nJe suis là .\n")

    def args(out: Path) -> list[str]:
        if command == "inference.py":
            return ["inference.py", "--run", str(trained_run), "--src", str(source), "--output", str(out)]
        return ["average.py", "--run", str(trained_run), "--average_last", "2", "--output", str(out)]

    reference = tmp_path / "reference.out"
    points = write_points(args(reference), tmp_path / "writes.log")
    whole = reference.read_bytes()
    for n in range(1, len(points) + 1):
        out = tmp_path / f"out{n}"
        assert in_forked_process(args(out), kill_at=n) == -9, n
        assert not out.exists() or out.read_bytes() == whole, points[n - 1]
        finished = out.exists()
        assert in_forked_process(args(out)) == (2 if finished else 0), n
        assert out.read_bytes() == whole
        assert leftovers(tmp_path) == [], n
    assert [line.split("\t")[1] for line in points] == ["written", "renamed"]


@pytest.mark.slow
def sweep_of_one_run(untested: Path, tmp_path: Path):
    """(a template runs root holding a copy of the untested run as demo/rope, the sweep.py command over
    a root like it: the tiny run's settings, its summary inside the root)."""
    from helpers import tiny_overrides

    template = tmp_path / "template"
    run = copy_of(untested, template / "demo" / "rope")
    sets = [s for s in tiny_overrides(run, tmp_path / "cache", steps=6)[1::2] if not s.startswith("run_dir=")]
    flags = [x for s in sets for x in ("--set", s)]

    def sweep(root: Path) -> list[str]:
        return [
            "sweep.py",
            "configs/demo/rope.yaml",
            "--runs_root",
            str(root),
            *flags,
            "--output",
            str(root / "summary"),
        ]

    return template, sweep


@pytest.mark.slow
def test_a_sweep_killed_in_its_summary_finishes_it(untested: Path, tmp_path: Path) -> None:
    """sweep.py over a finished, scored run goes straight to its summary (compare.py's set): killed at
    its write points, the same sweep again skips the run and finishes the summary, no --overwrite."""
    template, sweep = sweep_of_one_run(untested, tmp_path)
    assert in_forked_process(["test.py", "--run", str(template / "demo" / "rope")]) == 0

    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    points = write_points(sweep(reference), tmp_path / "writes.log")
    new = summary_set_of(reference)
    assert new and not any("/test/" in line or "checkpoints" in line for line in points), points  # (skipped)
    for n in sample(points, every=False):  # (compare.py's own points: test_compare_points)
        root = tmp_path / f"root{n}"
        shutil.copytree(template, root)
        assert in_forked_process(sweep(root), kill_at=n) == -9, n
        assert summary_set_of(root) in ({}, new), ("mixed", points[n - 1])
        assert in_forked_process(sweep(root)) == 0, n
        assert summary_set_of(root) == new, differences(summary_set_of(root), new)


@pytest.mark.slow
def test_a_sweep_killed_while_publishing_a_test_finishes_it(untested: Path, tmp_path: Path) -> None:
    """Issue 67: sweep.py killed while a seed's test/ was being published (its scores.json already
    moved) skipped the run as finished on every rerun and exited 2 naming a test.py command the user
    never typed; and a kill before the journal left a .test.staging in the run for good. The same sweep
    now finishes its own test set (and clears the staging), exit 0, as the uninterrupted sweep."""
    template, sweep = sweep_of_one_run(untested, tmp_path)

    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    points = write_points(sweep(reference), tmp_path / "writes.log")
    whole = published_test_set(reference / "demo" / "rope")
    test_moves = [n for n, line in enumerate(points, 1) if "\tpublished\t" in line and "/rope/test/" in line]
    scores_moved = next(n for n in test_moves if points[n - 1].endswith("/rope/test/scores.json"))
    assert scores_moved < test_moves[-1]  # (a kill there leaves scores.json beside earlier files)
    staged = [n for n, line in enumerate(points, 1) if ".test.staging" in line]
    for n in (test_moves[0], scores_moved, staged[0]):
        root = shutil.copytree(template, tmp_path / f"root{n}")
        assert in_forked_process(sweep(root), kill_at=n) == -9, n
        assert in_forked_process(sweep(root)) == 0, (n, points[n - 1])
        assert published_test_set(root / "demo" / "rope") == whole, points[n - 1]
        assert leftovers(root / "demo") == [], (n, leftovers(root / "demo"))


def archivable_run(run: Path, hypothesis: str) -> None:
    """A tested run as test.py leaves it (plain files), small enough to pack many times."""
    (run / "test" / "concat" / "k2").mkdir(parents=True)
    for name in ("config.yaml", "metrics.jsonl", "training_lengths.json", "provenance.json"):
        (run / name).write_text('{"event": "end"}\n' if name.endswith(".jsonl") else f'{{"file": "{name}"}}\n')
    (run / "data_report.json").write_text('{"corpus": 1}\n')
    for folder in ("test", "test/concat/k2"):
        (run / folder / "hypotheses.txt").write_text(f"{hypothesis}\n")
        (run / folder / "references.txt").write_text("the reference\n")
    (run / "test" / "scores.json").write_text('{"bleu": 1}\n')


def archive_view(run: Path) -> dict:
    """An archived run as its readers see it: each file's text by its plain name."""
    from tools.archive import logical_files, tested_folders
    from utils.stored_files import read_text

    names = ["config.yaml", "metrics.jsonl", "data_report.json"]
    texts = {n: read_text(run / n) for n in names}
    texts.update({str(p.relative_to(run)): read_text(p) for f in tested_folders(run) for p in logical_files(f)})
    return texts


def archived_as_published(run: Path) -> dict:
    """archive_view of an archived run as its readers take it (as_published), the view made beside it
    in its study (where its shared texts are) and removed again."""
    view = as_published(run, run.parent / ".view")
    try:
        return archive_view(view)
    finally:
        shutil.rmtree(view)
