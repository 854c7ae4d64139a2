"""Reading a run's test outputs for compare.py (study/read/run_outputs.py): hypotheses and references
one line per pair, source lengths as numbers, the teacher-forced NLL beyond training per input, each
damage one line naming the file (and line) with the test.py command that writes it again; a test set
in the middle of its publication is read by nobody."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.read.run_outputs import nll_beyond, paired_lines, source_lengths
from study.records import RunRecord


def run_with_test(tmp_path: Path) -> tuple[RunRecord, Path]:
    run = tmp_path / "run"
    (run / "test").mkdir(parents=True)
    (run / "config.yaml").write_text("name: x\n")
    return RunRecord(run=str(run)), run / "test"


def test_paired_lines_and_source_lengths(tmp_path: Path) -> None:
    row, test = run_with_test(tmp_path)
    (test / "hypotheses.txt").write_text("a\nb\n")
    (test / "references.txt").write_text("A\nB\n")
    (test / "source_lengths.txt").write_text("3\n7\n")
    assert paired_lines(test) == (["a", "b"], ["A", "B"]) and source_lengths(row) == [3, 7]
    (test / "references.txt").write_text("A\n")
    with pytest.raises(ValueError, match="hypotheses.txt"):
        paired_lines(test)
    (test / "source_lengths.txt").write_text("3\nseven\n")
    with pytest.raises(ValueError, match="source_lengths.txt"):
        source_lengths(row)


def test_the_nll_beyond_training_per_input_and_its_damage(tmp_path: Path) -> None:
    row, test = run_with_test(tmp_path)
    assert nll_beyond(row) is None  # not written
    beyond = test / "teacher_forced_beyond.tsv"
    beyond.write_text("k\tinput\ttokens\tnll_no_eos_sum\n1\t0\t4\t6.5\n2\t3\t2\t1.0\n")
    assert nll_beyond(row) == {(1, 0): (6.5, 4.0), (2, 3): (1.0, 2.0)}
    beyond.write_text("k\tinput\ttokens\tnll_no_eos_sum\n1\t0\t4\t-1.0\n")
    with pytest.raises(ValueError, match=r"line 2: an NLL sum must be finite and not negative.*python test.py --run"):
        nll_beyond(row)
    beyond.write_text("k\tinput\ttokens\tnll_no_eos_sum\n1\t0\n")
    with pytest.raises(ValueError, match="line 2 is damaged"):
        nll_beyond(row)
