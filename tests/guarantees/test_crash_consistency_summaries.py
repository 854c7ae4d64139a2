"""The crash tests of the summaries and the archive (tests/guarantees/test_crash_consistency.py
explains the method): compare.py and `tools/archive.py pack` killed at each write point leave the
earlier set or the new one, and the same command finishes it. A module of its own so that the
suite's two workers share the crash tests (pytest-xdist gives each test module to one worker)."""

from __future__ import annotations

import shutil
from pathlib import Path

import guarantees.test_crash_consistency as crash_tests
import pytest
from guarantees.test_crash_consistency import (
    archivable_run,
    archive_view,
    archived_as_published,
    differences,
    in_forked_process,
    leftovers,
    sample,
    summary_set_of,
    write_points,
)
from helpers import scored_and_sinusoidal

every = crash_tests.every  # the fixture: a sample of the write points, or every one in the slow tier


@pytest.fixture(scope="module")
def two_runs(trained_run: Path, tmp_path_factory) -> list[str]:
    """The tiny run scored, and a copy of it labelled sinusoidal: a comparison with findings and plots."""
    return [str(p) for p in scored_and_sinusoidal(trained_run, tmp_path_factory.mktemp("compare"))]


@pytest.mark.slow
def test_compare_points(two_runs: list[str], tmp_path: Path, every: bool) -> None:
    """compare.py killed at each write point, into an empty folder and over an earlier summary with
    other contents (--overwrite): the summary set is absent, the earlier one or the new one, and the
    same command again gives the uninterrupted result."""

    def compare(folder: Path, *flags: str) -> list[str]:
        return ["compare.py", *two_runs, "--bootstrap_samples", "50", "--output", str(folder / "summary"), *flags]

    reference = tmp_path / "reference"
    points = write_points(compare(reference), tmp_path / "writes.log")
    assert len(points) >= 20, points
    new = summary_set_of(reference)
    assert in_forked_process(compare(reference, "--overwrite", "--no_significance")) == 0
    assert set(summary_set_of(reference)) < set(new)  # no findings: the new set adds files

    for n in sample(points, every):
        # into an empty folder, the same call again without --overwrite: at the commit point (and, in
        # the slow tier, at each sampled point; the case over an earlier summary: at every point)
        if n in sample(points, every=False) and (every or "renamed" in points[n - 1]):
            fresh = tmp_path / f"fresh{n}"
            assert in_forked_process(compare(fresh), kill_at=n) == -9, n
            assert summary_set_of(fresh) in ({}, new), (points[n - 1], differences(summary_set_of(fresh), new))
            assert in_forked_process(compare(fresh)) == 0, n
            assert summary_set_of(fresh) == new, differences(summary_set_of(fresh), new)
            assert leftovers(fresh) == [], n

        over = tmp_path / f"over{n}"
        shutil.copytree(reference, over)  # the summary without findings, and compare.py's record of it
        earlier = summary_set_of(over)
        assert in_forked_process(compare(over, "--overwrite"), kill_at=n) == -9, n
        assert summary_set_of(over) in (earlier, new), ("mixed", points[n - 1])
        assert in_forked_process(compare(over, "--overwrite")) == 0, n
        assert summary_set_of(over) == new, differences(summary_set_of(over), new)
        assert leftovers(over) == [], n


@pytest.mark.slow
def test_archive_points(tmp_path: Path, every: bool) -> None:
    """tools/archive.py pack, into the archive and --in-place, killed at each write point: the archived
    run is the earlier one or the new one, whole (never gone: issue 67), and the same command again
    gives the uninterrupted archive."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    archivable_run(runs / "demo" / "rope", "old")
    pack = ["tools/archive.py", "pack", str(runs / "demo"), "--runs", str(runs), "--results", str(results)]
    assert in_forked_process(pack) == 0
    earlier = archive_view(results / "demo" / "rope")
    shutil.rmtree(runs / "demo" / "rope")
    archivable_run(runs / "demo" / "rope", "new")
    reference = tmp_path / "reference"
    shutil.copytree(results, reference)
    points = write_points([*pack[:-1], str(reference)], tmp_path / "writes.log")
    new = archive_view(reference / "demo" / "rope")
    assert new != earlier
    for n in sample(points, every):
        case = tmp_path / f"case{n}"
        shutil.copytree(results, case)
        assert in_forked_process([*pack[:-1], str(case)], kill_at=n) == -9, n
        seen = archived_as_published(case / "demo" / "rope")
        assert seen in (earlier, new), (points[n - 1], seen)
        assert in_forked_process([*pack[:-1], str(case)]) == 0, n
        assert archive_view(case / "demo" / "rope") == new and leftovers(case) == [], n

    # in place: an archived run whose scores are still plain (re-stored as scores.json.xz)
    plain = tmp_path / "plain" / "demo"
    shutil.copytree(reference / "demo", plain)
    (plain / "rope" / "test" / "scores.json.xz").unlink()
    (plain / "rope" / "test" / "scores.json").write_text('{"bleu": 1}\n')
    in_place = ["tools/archive.py", "pack", "--in-place"]
    points = write_points([*in_place, str(shutil.copytree(plain, tmp_path / "once" / "demo"))], tmp_path / "w2.log")
    for n in sample(points, every):
        case = shutil.copytree(plain, tmp_path / f"inplace{n}" / "demo")
        assert in_forked_process([*in_place, str(case)], kill_at=n) == -9, n
        assert (case / "rope" / "config.yaml").is_file(), (points[n - 1], "the run folder is gone")
        assert archived_as_published(case / "rope") == new, points[n - 1]
        assert in_forked_process([*in_place, str(case)]) == 0, n
        assert archive_view(case / "rope") == new and not (case / "rope" / "test" / "scores.json").exists()
        assert leftovers(case) == [], n
