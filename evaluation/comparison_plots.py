"""The comparison plots written by compare.py: test BLEU per configuration with error bars,
BLEU per source-length bucket, BLEU and length ratio against k (inputs of k joined test pairs), the
teacher-forced NLL against target position, and validation curves (one colour per configuration, one line
style per seed). Input: compare.py's groups (one per configuration, with its runs)."""

from __future__ import annotations

from pathlib import Path

from utils.files import atomic_output


def line_styles(labels: list[str]) -> list[dict]:
    """A colour and line style per configuration for the line plots: a configuration whose label
    is another's plus a suffix (`x_concat` beside `x`) takes that one's colour, dashed, so that a
    variant reads as its base's."""
    from matplotlib import colormaps

    bases = [lab for lab in labels if not any(lab != other and lab.startswith(other + "_") for other in labels)]
    # more than 10 bases: tab20's ten dark hues first, then their light pairs
    palette = ([f"C{i}" for i in range(10)] if len(bases) <= 10
               else [colormaps["tab20"](i) for i in (*range(0, 20, 2), *range(1, 20, 2))])
    styles = []
    for lab in labels:
        base = next(b for b in bases if lab == b or lab.startswith(b + "_"))
        styles.append({"color": palette[bases.index(base) % len(palette)], "linestyle": "-" if lab == base else "--"})
    return styles


def write_plots(groups: list[dict], prefix: Path) -> list[Path]:
    """PREFIX_bleu.png, PREFIX_length_buckets.png, PREFIX_concat.png, PREFIX_teacher_forced.png,
    PREFIX_curves.png (each only when there is data for it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stem = prefix
    written = []

    def save(fig, suffix: str) -> None:
        path = stem.with_name(stem.name + suffix)
        fig.tight_layout()
        with atomic_output(path, "wb", encoding=None) as f:  # whole or not at all
            fig.savefig(f, dpi=100, format="png", bbox_inches="tight")  # (legends outside the axes)
        plt.close(fig)
        written.append(path)

    def height(entries: int, least: float) -> float:  # room for a legend of this many lines beside the axes
        return max(least, 0.2 * entries)

    scored = [g for g in groups if g["mean"]["sacrebleu"] is not None]
    if scored:
        fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(scored) + 2), 3.5))
        x = range(len(scored))
        ax.bar(x, [g["mean"]["sacrebleu"] for g in scored], yerr=[g["std"]["sacrebleu"] or 0.0 for g in scored],
               capsize=4, color=[f"C{i}" for i in x])
        ax.set_xticks(list(x), [f"{g['label']}\n(n={g['n']})" for g in scored], fontsize=8)
        ax.set_ylabel("test sacreBLEU")
        ax.set_title("Test sacreBLEU (mean ± std over seeds)")
        save(fig, "_bleu.png")

    bucketed = [g for g in groups if g["by_source_length"]]
    if bucketed:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        labels = [b["bucket"] for b in bucketed[0]["by_source_length"]]
        for g in bucketed:
            by = {b["bucket"]: b["mean"] for b in g["by_source_length"]}
            ax.plot(labels, [by.get(lab) if by.get(lab) is not None else float("nan") for lab in labels],
                    marker="o", label=g["label"])
        ax.set_xlabel("source length (subword tokens)")
        ax.set_ylabel("test sacreBLEU")
        ax.legend(fontsize=7)
        save(fig, "_length_buckets.png")

    with_k = [g for g in groups if any(c["bleu"] is not None for c in (g.get("concat") or {}).values())]
    if with_k:
        fig, (bleu_ax, ratio_ax) = plt.subplots(1, 2, figsize=(10, height(len(with_k), 3.8)))
        for g, line in zip(with_k, line_styles([g["label"] for g in with_k])):
            ks = [k for k, c in sorted(g["concat"].items()) if c["bleu"] is not None]
            c = [g["concat"][k] for k in ks]
            style = {"marker": "o", "markersize": 3, "capsize": 2, "label": f"{g['label']} (n={g['n']})", **line}
            bleu_ax.errorbar(ks, [x["bleu"] for x in c], yerr=[x["bleu_std"] or 0.0 for x in c], **style)
            ratio_ax.errorbar(ks, [x["ratio"] for x in c], yerr=[x["ratio_std"] or 0.0 for x in c], **style)
        ratio_ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        bleu_ax.set(xlabel="k (consecutive test pairs per input)", ylabel="test sacreBLEU",
                    title="Length extrapolation (mean ± std over seeds)")
        ratio_ax.set(xlabel="k (consecutive test pairs per input)", ylabel="hypothesis / reference length",
                     title="Output length")
        ratio_ax.legend(*bleu_ax.get_legend_handles_labels(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        save(fig, "_concat.png")

    forced = [g for g in groups if g.get("teacher_forced")]
    if forced:
        fig, ax = plt.subplots(figsize=(7, height(len(forced) + 1, 4.0)))
        lengths: dict[int, list[dict]] = {}
        for g, style in zip(forced, line_styles([g["label"] for g in forced])):
            points = [b for b in g["teacher_forced"]["by_position"] if b["mean"] is not None]
            ax.errorbar([b["from"] for b in points], [b["mean"] for b in points],
                        yerr=[b["std"] or 0.0 for b in points], marker="o", markersize=3, capsize=2,
                        label=g["label"], **style)
            if g["teacher_forced"]["training_length"]:  # the group's runs agree on it
                lengths.setdefault(g["teacher_forced"]["training_length"], []).append(style)
        for length, members in lengths.items():  # one grey line when every configuration shares it
            shared = len(lengths) == 1 and len(members) == len(forced)
            ax.axvline(length, linestyle=":", linewidth=1, color="grey" if shared else members[0]["color"],
                       label=f"training length {length}" if shared else None)
        ax.set(xlabel="target position (bucket lower edge; 0 = BOS)", ylabel="NLL, EOS renormalised out")
        ax.set_title("Teacher-forced NLL by target position, pooled over k (mean ± std over seeds)", fontsize=10)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        save(fig, "_teacher_forced.png")

    runs = [(i, j, g, r) for i, g in enumerate(groups) for j, r in enumerate(g["runs"]) if r["valid_events"]]
    if runs:
        columns = 1 + len(runs) // 40  # a study of many runs: the legend in columns beside the axes
        fig, (loss_ax, bleu_ax) = plt.subplots(1, 2, figsize=(10, height(-(-len(runs) // columns), 3.8)))
        for i, j, g, r in runs:  # one colour per configuration, one line style per seed
            style = {"marker": ".", "color": f"C{i % 10}", "linestyle": ("-", "--", ":", "-.")[j % 4],
                     "label": f"{g['label']} seed {r['seed']}"}
            loss = [(e["step"], e["valid_loss"]) for e in r["valid_events"] if e.get("valid_loss") is not None]
            bleu = [(e["step"], e["valid_bleu"]) for e in r["valid_events"] if e.get("valid_bleu") is not None]
            if loss:
                loss_ax.plot(*zip(*loss), **style)
            if bleu:
                bleu_ax.plot(*zip(*bleu), **style)
        loss_ax.set(xlabel="step", ylabel="valid loss", title="Validation loss")
        bleu_ax.set(xlabel="step", ylabel="valid sacreBLEU (greedy)", title="Validation BLEU")
        bleu_ax.legend(*loss_ax.get_legend_handles_labels(), fontsize=7, ncol=columns, loc="upper left",
                       bbox_to_anchor=(1.01, 1.0))
        save(fig, "_curves.png")
    return written
