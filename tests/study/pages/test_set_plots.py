"""<prefix>_sets.png (study/pages/set_plots.py, issue 78): drawn for a declared comparison whose claim spans
test sets, one panel per comparison with each set's per-seed differences; none for a claim on its own rows."""

from __future__ import annotations

from pathlib import Path

from helpers import across_findings


def test_the_plot_draws_each_set_of_a_claim_across_and_nothing_else(tmp_path: Path) -> None:
    from study.pages.comparison_plots import save_figure
    from study.pages.set_plots import sets_figure

    fig = sets_figure(across_findings())
    (panel,) = fig.axes
    assert [t.get_text() for t in panel.get_xticklabels()] == ["own", "news"]
    assert len(panel.collections) == 2 * 2  # each set: its seeds (dots) and its mean (a bar)
    path = save_figure(fig, tmp_path / "summary_sets.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sets_figure(across_findings("per_set")) is None
