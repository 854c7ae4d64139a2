"""Issue 75 (case 2): the readers of an archived run — `tools/archive.py unpack` and `cat`, compare.py
over results/ — take a run that a killed `tools/archive.py pack` left half published as its readers'
rule says (utils/publish.settle): they finish the pack's journal (beside the run) and read the new
archived run whole, never the earlier one's scores beside the new hypotheses; one that cannot finish
it names the command that does. The kills are those of test_crash_consistency.py (HARNESS_KILL_AT)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import guarantees.test_crash_consistency as crash_tests
import pytest
from guarantees.test_crash_consistency import (
    archivable_run,
    archive_view,
    archived_as_published,
    in_forked_process,
    leftovers,
    sample,
    write_points,
)
from helpers import ROOT, one_error_line, plain_copy
from in_process import run_in_process

from utils.publish import journal_file
from utils.stored_files import read_text

FILES = ("test/hypotheses.txt", "test/scores.json")
every = crash_tests.every  # the fixture: a sample of the write points, or every one in the slow tier


def killed_packs(tmp_path: Path, every: bool):
    """(the archived run a pack was killed in, whether its journal was written) at each sampled write
    point of a pack of a re-tested run over its earlier archive, and of an in-place pack (issue 75)."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    archivable_run(runs / "demo" / "rope", "old")
    pack = ["tools/archive.py", "pack", str(runs / "demo"), "--runs", str(runs), "--results"]
    assert in_forked_process([*pack, str(results)]) == 0
    shutil.rmtree(runs / "demo" / "rope")
    archivable_run(runs / "demo" / "rope", "new")
    plain = tmp_path / "plain"  # archived with its scores still plain: an in-place pack re-stores them
    assert in_forked_process([*pack, str(plain)]) == 0
    (plain / "demo" / "rope" / "test" / "scores.json.xz").unlink()
    (plain / "demo" / "rope" / "test" / "scores.json").write_text('{"bleu": 1}\n')
    flows = (
        ("into", results, lambda case: [*pack, str(case)]),
        ("in_place", plain, lambda case: ["tools/archive.py", "pack", "--in-place", str(case / "demo")]),
    )
    for name, start, command in flows:
        points = write_points(command(shutil.copytree(start, tmp_path / f"{name}_once")), tmp_path / f"{name}.log")
        for i, n in enumerate(sample(points, every)):  # each reader at every other point (both see a journal)
            case = shutil.copytree(start, tmp_path / f"{name}{n}")
            assert in_forked_process(command(case), kill_at=n) == -9, n
            yield ("unpack", "cat")[i % 2], case / "demo" / "rope", journal_file(case / "demo" / "rope").is_file()


@pytest.mark.slow
def test_unpack_and_cat_finish_a_pack_killed_at_any_point(tmp_path: Path, every: bool) -> None:
    for reader, run, pending in killed_packs(tmp_path, every):
        expected = archived_as_published(run)  # the new archived run once its journal is written
        if reader == "unpack":
            plain = run.parent.parent / "unpacked"
            procs = [run_in_process(["tools/archive.py", "unpack", str(run), str(plain)])]
            assert procs[0].returncode == 0, (run, procs[0].stderr)
            assert archive_view(plain) == expected, run
        else:  # (the first finishes it)
            procs = [run_in_process(["tools/archive.py", "cat", str(run / name)]) for name in FILES]
            for name, proc in zip(FILES, procs):
                assert proc.returncode == 0 and proc.stdout == expected[name], (run, name, proc.stderr)
        said = "".join(p.stdout + p.stderr for p in procs)
        said = "completed" in said and "which a stopped tools/archive.py pack had left half published" in said
        assert said == pending and (leftovers(run.parent) == [] or not pending), run  # (else the pack's own)


@pytest.mark.slow
def test_compare_over_the_archive_finishes_a_killed_pack_or_names_who_does(tmp_path: Path) -> None:
    """compare.py over archived demo runs after a pack killed with the new hypotheses published beside
    the earlier scores (and an in-place pack killed with both forms of scores.json there): it finishes
    the journal and compares the new run; while a pack holds the run, one line naming that pack."""
    results = tmp_path / "results" / "demo"
    for name in ("rope", "sinusoidal", "test_sets"):
        shutil.copytree(ROOT / "results" / "demo" / name, results / name)
    run = plain_copy("demo/rope", tmp_path / "runs" / "demo" / "rope")
    hypotheses = (run / "test" / "hypotheses.txt").read_text().splitlines(keepends=True)
    (run / "test" / "hypotheses.txt").write_text("".join(["a re-tested line\n", *hypotheses[1:]]))
    scores = json.loads((run / "test" / "scores.json").read_text())
    (run / "test" / "scores.json").write_text(json.dumps({**scores, "sacrebleu": 12.345}, indent=2) + "\n")
    into = ["tools/archive.py", "pack", str(run), "--runs", str(tmp_path / "runs"), "--results"]
    plain = shutil.copytree(results.parent, tmp_path / "plain")  # its scores plain: re-stored in place
    (plain / "demo" / "rope" / "test" / "scores.json").write_text(read_text(results / "rope" / "test" / "scores.json"))
    (plain / "demo" / "rope" / "test" / "scores.json.xz").unlink()
    flows = (
        ("into", results.parent, lambda root: [*into, str(root)], "/rope/test/hypotheses.txt.tar.xz"),
        ("in_place", plain, lambda root: ["tools/archive.py", "pack", "--in-place", str(root / "demo")], ".json.xz"),
    )
    for name, start, command, moved in flows:
        points = write_points(command(shutil.copytree(start, tmp_path / f"{name}_once")), tmp_path / f"{name}.log")
        at = next(n for n, line in enumerate(points, 1) if "\tpublished\t" in line and line.endswith(moved))
        case = shutil.copytree(start, tmp_path / name)
        assert in_forked_process(command(case), kill_at=at) == -9
        rope = case / "demo" / "rope"
        compare = ["compare.py", str(rope), str(case / "demo" / "sinusoidal"), "--no_significance"]
        if name == "into":  # the mix the kill left: the new hypotheses beside the earlier scores
            assert json.loads(read_text(rope / "test" / "scores.json"))["sacrebleu"] != 12.345
            (rope / ".lock.pid").write_text(f"PID {os.getpid()}: tools/archive.py pack {run}\n")  # a pack at work
            held = run_in_process(compare)
            assert "is being published by PID" in one_error_line(held) and "tools/archive.py pack" in held.stderr
            (rope / ".lock.pid").unlink()
        done = run_in_process(compare)
        assert done.returncode == 0, (name, done.stderr)
        assert "which a stopped tools/archive.py pack had left half published" in done.stdout + done.stderr, name
        expected = 12.345 if name == "into" else scores["sacrebleu"]
        assert json.loads(read_text(rope / "test" / "scores.json"))["sacrebleu"] == expected and not leftovers(case)
