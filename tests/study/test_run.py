"""A study judged in one call (study/run.py, compare.py's recipe): read whole first, then judged and
paged from the records alone (the run folders may be gone by then), the findings' p copied into the
configurations after the findings exist, the pages in compare.py's order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_study_is_read_whole_then_judged_and_paged_from_its_records(tmp_path: Path, monkeypatch) -> None:
    import study.run as recipe

    for name in ("sinusoidal", "sinusoidal_seed1", "rope", "rope_seed1", "test_sets"):  # (references stored once)
        shutil.copytree(ROOT / "results" / "demo" / name, tmp_path / "demo" / name)
    real = recipe.read_study

    def read_then_remove(*args, **kwargs):
        study = real(*args, **kwargs)
        shutil.rmtree(tmp_path / "demo")  # nothing after the read may open a file of the study
        return study

    monkeypatch.setattr(recipe, "read_study", read_then_remove)
    result = recipe.judge_study([str(tmp_path / "demo" / "*")], bootstrap_samples=200)
    assert not (tmp_path / "demo").exists()
    assert result.baseline.is_baseline and result.baseline.label == "demo/sinusoidal"
    (rope,) = [g for g in result.groups if g.label == "demo/rope"]
    (test,) = [t for t in result.findings.tables if t.name == "test"]
    assert rope.p_value is not None and rope.p_value == test.rows[0].p_value  # copied from the findings
    assert rope.seeds_above is not None and result.baseline.seeds_above is None
    pages = result.pages()
    assert list(pages) == [".md", ".json", ".csv", "_findings.md", "_findings.json", "_headline.md", "_provenance.md"]
    assert pages[".md"] == result.summary() + "\n" and "demo/rope" in pages[".md"]
    assert pages["_findings.md"] == result.findings_text() + "\n"
    assert [p.name for p in result.write_plots(tmp_path / "summary")][0] == "summary_bleu.png"
    monkeypatch.undo()
    descriptive = recipe.judge_study(
        [str(ROOT / "results" / "demo" / n) for n in ("rope", "sinusoidal")], significance=False
    )
    assert descriptive.findings is None and descriptive.findings_text() is None
    assert list(descriptive.pages()) == [".md", ".json", ".csv", "_provenance.md"]
