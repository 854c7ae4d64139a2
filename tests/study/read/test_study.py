"""A study read in one call (study/read/study.py): the outputs its findings compare are read once,
before anything is tested (the findings then open no file), and only those of runs the findings can
pair with the baseline's."""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from pathlib import Path

from tests.helpers import nll_beyond_run


def test_the_findings_are_judged_from_what_was_read_and_open_no_file(tmp_path: Path) -> None:
    from study.judge.report import compute_findings
    from study.read.study import read_compared
    from study.records import Configuration

    rng = random.Random(3)
    base = Configuration(tuple(nll_beyond_run(tmp_path, "s", s, 0.0, rng) for s in (1, 2, 3)), "study/s")
    runs = [nll_beyond_run(tmp_path, "a", s, 0.3, rng) for s in (1, 2, 3, 4)]  # seed 4: no baseline run
    runs[1] = replace(runs[1], stale_test="test/ scored an older checkpoint")  # not compared: not read
    good = Configuration(tuple(runs), "study/a", "alibi")
    study = read_compared([base, good], base)
    assert sorted(Path(folder).parent.name for folder in study.outputs.runs) == [
        "a_seed1",
        "a_seed3",
        "s_seed1",
        "s_seed2",
        "s_seed3",
    ]
    before = compute_findings(study, n_samples=200)
    for folder in tmp_path.iterdir():  # every file gone: the findings read none of them
        shutil.rmtree(folder)
    assert compute_findings(study, n_samples=200) == before
    (table,) = [t for t in before.tables if t.name == "teacher_forced"]
    assert table.rows[0].seeds == (1, 3)
    assert read_compared([base], base).outputs.runs == {}  # nothing to compare: nothing read
