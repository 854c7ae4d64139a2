"""compare.py's length-extrapolation tables (study/pages/length_report.py): per k, each configuration's
sacreBLEU and length ratio as mean ± std over its seeds and its same-seed wins over the baseline;
runs scored on different joined inputs are never averaged or compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.pages.length_report import concat_tables
from study.read.run_groups import add_concat_stats, check_same_inputs, concat_ks
from study.records import Configuration, KScore, RunRecord, frozen_map


def run(tmp_path: Path, name: str, seed: int, bleu: dict[int, float], refs: str = "a b\n") -> RunRecord:
    folder = tmp_path / name / "test"
    for k in bleu:
        (folder / "concat" / f"k{k}").mkdir(parents=True, exist_ok=True)
        (folder / "concat" / f"k{k}" / "references.txt").write_text(refs)
        (folder / "concat" / f"k{k}" / "hypotheses.txt").write_text("x y\n")
    concat = frozen_map((k, KScore(b, 0.9)) for k, b in bleu.items())
    return RunRecord(run=str(tmp_path / name), seed=seed, concat=concat)


def test_per_k_means_wins_and_tables(tmp_path: Path) -> None:
    base = Configuration((run(tmp_path, "s1", 1, {1: 30.0, 4: 10.0}), run(tmp_path, "s2", 2, {1: 32.0, 4: 12.0})),
                         "sinusoidal", "sinusoidal")  # fmt: skip
    rope = Configuration((run(tmp_path, "r1", 1, {1: 31.0, 4: 15.0}), run(tmp_path, "r2", 2, {1: 31.0, 4: 11.0})),
                         "rope", "rope")  # fmt: skip
    assert concat_ks([base, rope]) == [1, 4]
    base, rope = add_concat_stats([base, rope], base, margin=0.1)
    assert rope.concat[4].bleu.mean == 13.0 and rope.concat[4].seeds_above == (1, 2)
    assert base.concat[1].bleu.std == pytest.approx(1.4142136) and base.concat[1].seeds_above is None
    tables = concat_tables([base, rope], base)
    assert "| rope | rope | 31.00 ± 0.00 | 13.00 ± 2.83 |" in tables
    assert "| sinusoidal | sinusoidal | baseline | baseline |" in tables and "| rope | rope | 1/2 | 1/2 |" in tables


def test_runs_scored_on_other_joined_inputs_are_refused(tmp_path: Path) -> None:
    a = Configuration((run(tmp_path, "a", 1, {2: 20.0}, refs="one\n"),), "a")
    b = Configuration((run(tmp_path, "b", 1, {2: 21.0}, refs="other\n"),), "b")
    with pytest.raises(ValueError, match=r"the k=2 references differ between .*a and .*b"):
        check_same_inputs([a, b])
