"""The comparison plots written by compare.py, readable at thirty configurations: small multiples (one
panel per k, or per kind of training), one colour per encoding, one line style and marker per kind,
legends outside the data. Input: compare.py's configurations (study/records.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence, Union

from study.records import Configuration
from study.terms import Measure, Span, SpanKind
from utils.files import atomic_output
from utils.metrics import HEADLINE


@dataclass(frozen=True)
class Style:
    """A configuration's line in every plot: its colour (by encoding), line style and marker (by kind)."""

    color: Union[str, tuple[float, float, float, float]]  # a matplotlib colour: a name ("C0") or RGBA
    linestyle: str
    marker: str


KINDS = {  # how a configuration was trained or tested: its (line style, marker) in every plot
    "single sentences": ("-", "o"),
    "joined pairs": ("--", "s"),
    "randomized positions": (":", "^"),
    "scaled at inference": ("-.", "D"),
}


def kind_of(group: Configuration) -> str:
    """A variant is the same trained run tested with other settings."""
    if group.variant:
        return "scaled at inference"
    cfg = group.runs[0].config
    if cfg.data.train_concat.prob > 0:
        return "joined pairs"
    if cfg.model.positional.options.get("randomized"):  # (an option of some encodings only)
        return "randomized positions"
    return "single sentences"


def group_styles(groups: Sequence[Configuration]) -> list[Style]:
    """One colour per encoding (the same in every panel; tab20 beyond ten encodings), line style and
    marker by kind, so that a joined-pair run, a randomized one and a scaled one never look alike."""
    from matplotlib import colormaps

    encodings = list(dict.fromkeys(g.encoding for g in groups))
    palette = (
        [f"C{i}" for i in range(10)]
        if len(encodings) <= 10
        else [colormaps["tab20"](i) for i in (*range(0, 20, 2), *range(1, 20, 2))]
    )
    # the variants share their encoding (and colour): told apart by a colour of their own, in order
    variants = [i for i, g in enumerate(groups) if g.variant]
    colours = [
        colormaps["Dark2"](variants.index(i) % 8)
        if i in variants
        else palette[encodings.index(g.encoding) % len(palette)]
        for i, g in enumerate(groups)
    ]
    return [Style(colour, *KINDS[kind_of(g)]) for colour, g in zip(colours, groups)]


def panels_by_kind(groups: Sequence[Configuration]) -> list[tuple[str, list[int]]]:
    """(kind, indices of its groups) for every kind present, in KINDS order: one panel each."""
    kinds = [kind_of(g) for g in groups]
    return [(k, [i for i, x in enumerate(kinds) if x == k]) for k in KINDS if k in kinds]


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(groups: Sequence[Configuration], prefix: Path) -> list[Path]:
    """PREFIX + each of PLOT_SUFFIXES, each only when some configuration has data for it."""
    styles = group_styles(groups)
    written = []
    for suffix, (has, figure) in PLOTS.items():
        drawn = [i for i, g in enumerate(groups) if has(g)]
        if not drawn:
            continue
        written.append(save_figure(figure(groups, styles, drawn), prefix.with_name(prefix.name + suffix)))
    return written


def save_figure(fig, path: Path) -> Path:
    """A figure as a PNG at `path`, whole or not at all (the pages' one writer), then closed."""
    fig.tight_layout()
    with atomic_output(path, "wb", encoding=None) as f:
        fig.savefig(f, dpi=100, format="png", bbox_inches="tight")  # (legends outside the axes)
    pyplot().close(fig)
    return path


def kind_panels(groups: Sequence[Configuration], indices: list[int], width: float):
    """One panel per kind among groups[indices], room below each for its legend: (figure, axes, panels)."""
    panels = panels_by_kind([groups[i] for i in indices])
    rows = max(len(m) for _, m in panels)
    fig, axes = pyplot().subplots(
        1, len(panels), figsize=(width * len(panels) + 1.0, 3.6 + 0.16 * rows), sharey=True, squeeze=False
    )
    return fig, axes[0], [(ax, kind, [indices[m] for m in members]) for ax, (kind, members) in zip(axes[0], panels)]


def _seeds_label(g: Configuration) -> str:
    return f"{g.label} (n={g.n})"


def bleu_figure(groups: Sequence[Configuration], styles: Sequence[Style], scored: list[int]):
    """Test sacreBLEU, one row per configuration: readable at any number of them."""
    fig, ax = pyplot().subplots(figsize=(7.0, 0.28 * len(scored) + 1.2))
    y = list(range(len(scored)))[::-1]
    for yy, i in zip(y, scored):
        g = groups[i]
        ax.errorbar(
            [g.mean(HEADLINE)],
            [yy],
            xerr=[g.std(HEADLINE) or 0.0],
            capsize=3,
            marker=styles[i].marker,
            color=styles[i].color,
            linestyle="none",
        )
        if g.is_baseline:
            ax.axvline(g.mean(HEADLINE), color="grey", linewidth=0.8, linestyle=":")
    ax.set_yticks(y, [_seeds_label(groups[i]) for i in scored], fontsize=8)
    ax.set_xlabel("test sacreBLEU")
    ax.set_title("Test sacreBLEU (mean ± std over seeds; dotted: the baseline)", fontsize=10)
    return fig


def length_buckets_figure(groups: Sequence[Configuration], styles: Sequence[Style], bucketed: list[int]):
    """Test sacreBLEU per source-length bucket, one panel per kind of run."""
    fig, axes, panels = kind_panels(groups, bucketed, 4.2)
    labels = [b.bucket for b in groups[bucketed[0]].by_source_length]
    for ax, kind, members in panels:
        for i in members:
            by = {b.bucket: b.bleu.mean for b in groups[i].by_source_length}
            ax.plot(
                labels,
                [by.get(lab) if by.get(lab) is not None else float("nan") for lab in labels],
                label=groups[i].label,
                markersize=4,
                **asdict(styles[i]),
            )
        ax.set(xlabel="source length (subword tokens)", title=kind)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    axes[0].set_ylabel("test sacreBLEU (mean over seeds)")
    return fig


def concat_figure(groups: Sequence[Configuration], styles: Sequence[Style], with_k: list[int]):
    """One panel per k of joined inputs: configurations down the side, BLEU above the length ratio."""
    ks = sorted({k for i in with_k for k, c in groups[i].concat.items() if c.bleu is not None})
    fig, axes = pyplot().subplots(
        2, len(ks), figsize=(1.9 * len(ks) + 3.0, 0.22 * len(with_k) * 2 + 2.0), sharey=True, squeeze=False
    )
    y = list(range(len(with_k)))[::-1]
    for col, k in enumerate(ks):
        for row, (of, title) in enumerate((("bleu", Measure.SACREBLEU), ("ratio", "length ratio"))):
            ax = axes[row][col]
            for yy, i in zip(y, with_k):
                c = groups[i].concat.get(k)
                if c is None or getattr(c, of).mean is None:
                    continue
                ax.errorbar(
                    [getattr(c, of).mean],
                    [yy],
                    xerr=[getattr(c, of).std or 0.0],
                    marker=styles[i].marker,
                    color=styles[i].color,
                    markersize=4,
                    capsize=2,
                    linestyle="none",
                )
            base = next((groups[i].concat.get(k) for i in with_k if groups[i].is_baseline), None)
            if base is not None and getattr(base, of).mean is not None:
                ax.axvline(getattr(base, of).mean, color="grey", linewidth=0.8, linestyle=":")
            if of == "ratio":
                ax.axvline(1.0, color="black", linewidth=0.6)
            ax.tick_params(labelsize=7)
            ax.set_title(f"k={k}: {title}", fontsize=8)
    axes[0][0].set_yticks(y, [_seeds_label(groups[i]) for i in with_k], fontsize=7)
    markers = ", ".join(f"{marker} {kind}" for kind, (_, marker) in KINDS.items())
    fig.suptitle(
        f"Inputs of k joined test pairs (mean ± std over seeds; dotted: the baseline; markers: {markers})", fontsize=9
    )
    return fig


def degradation_figure(groups: Sequence[Configuration], styles: Sequence[Style], with_k: list[int]):
    """The length study's headline measure by k, one panel per kind: each seed a point, the mean over
    seeds with its 95% interval (Student's t over the seeds), the configurations side by side."""
    from scipy.stats import t

    fig, axes, panels = kind_panels(groups, with_k, 5.0)
    for ax, kind, members in panels:
        for slot, i in enumerate(members):
            g, style = groups[i], styles[i]
            ks = sorted(s.k for s in g.degradation if s.kind is SpanKind.AT_K)
            shift = 1 + 0.06 * (slot - (len(members) - 1) / 2) / max(1, len(members))  # side by side on log2 k
            means, halves = [], []
            for k in ks:
                at_k = Span(SpanKind.AT_K, k)
                values = [d[at_k] for d in g.degradation_runs if d and at_k in d]
                ax.plot(
                    [k * shift] * len(values),
                    values,
                    linestyle="none",
                    marker=".",
                    markersize=3,
                    alpha=0.45,
                    color=style.color,
                )
                means.append(sum(values) / len(values))
                sd = g.degradation[at_k].std
                halves.append(t.ppf(0.975, len(values) - 1) * sd / len(values) ** 0.5 if sd is not None else 0.0)
            ax.errorbar(
                [k * shift for k in ks],
                means,
                yerr=halves,
                markersize=4,
                capsize=2,
                label=_seeds_label(g),
                **asdict(style),
            )
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="k (test pairs joined in one input)", title=kind)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    axes[0].set_ylabel("NLL joined minus alone (nats per token)")
    fig.suptitle(
        "Degradation by k (points: seeds; the mean over seeds with its 95% interval; lower is better)", fontsize=9
    )
    return fig


def teacher_forced_figure(groups: Sequence[Configuration], styles: Sequence[Style], forced: list[int]):
    """Teacher-forced NLL by target position, one panel per kind; the training length(s) as lines."""
    fig, axes, panels = kind_panels(groups, forced, 4.5)
    for ax, kind, members in panels:
        lengths = set()
        for i in members:
            tf = groups[i].teacher_forced
            points = [b for b in tf.by_position if b.nll.mean is not None]
            ax.errorbar(
                [b.start for b in points],
                [b.nll.mean for b in points],
                yerr=[b.nll.std or 0.0 for b in points],
                markersize=3,
                capsize=2,
                label=groups[i].label,
                **asdict(styles[i]),
            )
            if tf.training_length:
                lengths.add(tf.training_length)
        for length in sorted(lengths):
            ax.axvline(length, linestyle=":", linewidth=1, color="grey")
        ax.set(xlabel="target position (bucket lower edge; 0 = BOS)", title=kind)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    axes[0].set_ylabel("NLL, EOS renormalised out")
    fig.suptitle(
        "Teacher-forced NLL by target position, pooled over k (mean ± std over seeds; dotted: training length)",
        fontsize=9,
    )
    return fig


def curves_figure(groups: Sequence[Configuration], styles: Sequence[Style], trained: list[int]):
    """Validation loss, one panel per configuration (a variant has its base's training), one line per seed."""
    cols = min(6, len(trained))
    rows = -(-len(trained) // cols)
    fig, axes = pyplot().subplots(
        rows, cols, figsize=(2.6 * cols + 0.5, 2.1 * rows + 0.8), sharex=True, sharey=True, squeeze=False
    )
    for ax, g in zip(axes.flat, (groups[i] for i in trained)):
        for j, r in enumerate(g.runs):
            loss = [(e.step, e.valid_loss) for e in r.valid_curve if e.valid_loss is not None]
            if loss:
                ax.plot(*zip(*loss), marker=".", color=f"C{j % 10}", label=f"seed {r.seed}")
        ax.set_title(g.label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in axes.flat[len(trained) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("step", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("valid loss", fontsize=8)
    fig.suptitle("Validation loss per configuration, one line per seed", fontsize=9)
    return fig


PLOTS = {  # suffix: (which configurations it draws, the figure), in the order written
    "_bleu.png": (lambda g: g.mean(HEADLINE) is not None, bleu_figure),
    "_length_buckets.png": (lambda g: g.by_source_length, length_buckets_figure),
    "_concat.png": (lambda g: any(c.bleu is not None for c in g.concat.values()), concat_figure),
    "_degradation.png": (lambda g: any(s.kind is SpanKind.AT_K for s in g.degradation), degradation_figure),
    "_teacher_forced.png": (lambda g: g.teacher_forced, teacher_forced_figure),
    "_curves.png": (lambda g: not g.variant and any(r.valid_curve for r in g.runs), curves_figure),
}
PLOT_SUFFIXES = tuple(PLOTS)
