"""Per-sentence files are checked before they are used (issue 58, scope 9), through the real entry
points: test.py records each file's row count and sha256 in scores.json (`files`), and compare.py
refuses, in one line naming the file, one that is cut short, grown or edited since, and a
teacher-forced NLL that is not finite or is negative (naming the line)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import one_error_line, relabelled, rewrite_test_output
from in_process import run_in_process


@pytest.fixture(scope="module")
def tested(trained_run: Path, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("files") / "run"
    shutil.copytree(trained_run, run)
    shutil.rmtree(run / "test", ignore_errors=True)
    assert run_in_process(["test.py", "--run", str(run), "--concat", "1", "2"]).returncode == 0
    return run


@pytest.fixture(scope="module")
def baseline(tested: Path, tmp_path_factory) -> Path:
    """A copy of the tested run labelled sinusoidal: compare.py reads both runs' files sentence by sentence."""
    other = tmp_path_factory.mktemp("files") / "sinusoidal"
    shutil.copytree(tested, other)
    return relabelled(other)


def test_scores_record_every_file_test_py_wrote(tested: Path) -> None:
    files = json.loads((tested / "test" / "scores.json").read_text())["files"]
    written = sorted(
        p.relative_to(tested / "test").as_posix()
        for p in (tested / "test").rglob("*")
        if p.is_file() and p.name != "scores.json"
    )
    assert sorted(files) == written and "concat/k2/hypotheses.txt" in files
    for name, record in files.items():
        data = (tested / "test" / name).read_bytes()
        assert record == {"rows": len(data.decode().splitlines()), "sha256": hashlib.sha256(data).hexdigest()}
    assert run_in_process(["compare.py", str(tested)]).returncode == 0  # (read whole: no complaint)


@pytest.mark.parametrize(
    "name, damage",
    [
        ("hypotheses.txt", lambda text: text[: text.rindex("\n", 0, len(text) - 1) + 1]),  # a line cut off
        ("concat/k2/references.txt", lambda text: text + "one more\n"),  # grown
        ("source_lengths.txt", lambda text: "9" + text),  # edited, the same number of lines
    ],
)
def test_compare_refuses_a_file_that_is_not_what_test_py_wrote(
    tested: Path, baseline: Path, tmp_path: Path, name, damage
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tested, run)
    path = run / "test" / name
    path.write_text(damage(path.read_text()))
    message = one_error_line(run_in_process(["compare.py", str(run), str(baseline)]))
    assert f"{path} is not the file test.py wrote" in message, message


def test_compare_refuses_a_negative_or_non_finite_nll(tested: Path, baseline: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tested, run)
    path = run / "test" / "teacher_forced_beyond.tsv"
    lines = path.read_text().splitlines()
    assert len(lines) >= 2, "the tiny run has tokens beyond its training length"
    k, i, n, _ = lines[1].split("\t")
    lines[1] = "\t".join([k, i, n, "nan"])
    rewrite_test_output(path, "\n".join(lines) + "\n")  # as if test.py had written it so
    message = one_error_line(run_in_process(["compare.py", str(run), str(baseline)]))
    assert f"{path} line 2: an NLL sum must be finite and not negative, got nan" in message, message
