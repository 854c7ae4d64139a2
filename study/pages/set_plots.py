"""<prefix>_sets.png: a declared comparison whose claim spans test sets (issue 78), its per-seed differences
on each set side by side (one panel per comparison; each seed a dot, the mean a bar, the tie margin a
band), drawn from the findings rows only where a study declares such a claim (saved by
study/pages/comparison_plots.save_figure)."""

from __future__ import annotations

from study.pages.comparison_plots import pyplot
from study.records import Findings
from study.terms import Measure

SETS_SUFFIX = "_sets.png"


def sets_figure(findings: Findings):
    """The figure of PREFIX_sets.png, or None where no declared comparison spans test sets."""
    across = [(t, r) for t in findings.tables for r in t.rows if r.declared and r.sets]
    if not across:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len(across), figsize=(3.2 * len(across) + 1, 3.4), squeeze=False)
    for ax, (t, r) in zip(axes[0], across):
        margin = findings.tie_margin.get(t.metric, 0.0)
        ax.axhspan(-margin, margin, color="0.85", label=f"tie margin ±{margin:g}")
        ax.axhline(0, color="0.5", linewidth=0.8)
        for x, s in enumerate(r.sets):
            on = findings.row(s.key(r.key))
            if on is None or not s.tested:
                continue
            diffs = on.differences
            ax.scatter([x] * len(diffs), diffs, s=14, color="C0", alpha=0.7, zorder=3)
            ax.hlines(on.mean_difference, x - 0.3, x + 0.3, color="C3", linewidth=2, zorder=4)
        ax.set_xticks(range(len(r.sets)), [s.name for s in r.sets])
        ax.set_xlim(-0.6, len(r.sets) - 0.4)
        ax.set_title(f"{r.config}\nagainst {findings.baseline}", fontsize=9)
        ax.set_ylabel(f"per-seed difference ({Measure(t.metric).unit})")
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle("each seed's difference on each declared test set (bar: the mean)", fontsize=10)
    return fig
