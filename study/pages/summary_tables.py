"""compare.py's tables: the main table (mean ± std over each configuration's seeds, p and same-seed
wins against the baseline), scores per source-length bucket and the teacher-forced diagnostic."""

from __future__ import annotations

from typing import Optional, Sequence

from study.judge.wording import format_p
from study.read.run_stats import STALE_MARK, numeric_columns, stale_note
from study.read.seed_provenance import mark_label, spans_note
from study.read.set_runs import SetStudy
from study.records import Configuration, Stats
from utils.markdown import table_head, table_row
from utils.metrics import HEADLINE, METRICS, metric_digits


def columns() -> list[tuple[str, str]]:
    """The main table's columns: (key, title)."""
    return [
        ("label", "config"),
        ("encoding", "encoding"),
        ("n", "seeds"),
        *numeric_columns().items(),
        ("p_value", "p vs baseline"),
        ("seeds_above", "seeds above baseline"),
    ]


# columns of the training itself: a variant row (the same trained run tested with other settings) shows its base's
TRAINING = ("train_loss", "valid_loss", "valid_accuracy", "params", "train_minutes", "tokens_per_sec", "steps")
SIGNATURE = next(m.about for m in METRICS if m.name == HEADLINE)  # sacreBLEU's signature (utils/metrics.py)
TF_COLUMN = "TF NLL beyond training"  # after "BLEU longer-than-training", when some run has the diagnostic
TF_NOTE = (
    "TF NLL beyond training: teacher-forced NLL of the references at target positions at or beyond the "
    "decoder's training length, EOS renormalised out, pooled token-weighted over k = 1 and every joined k, "
    "sentence boundaries of joined inputs excluded (test.py, evaluation/teacher_forced.py)."
)
FORMATS = {  # how each figure that is not a registered metric (those in their own digits) is shown
    **dict.fromkeys(("train_loss", "valid_loss", "valid_accuracy"), "{:.4f}".format),
    "longer_bleu": "{:.2f}".format,
    "train_minutes": "{:.1f}".format,
    **dict.fromkeys(("tokens_per_sec", "steps"), "{:.0f}".format),
    "params": lambda value: f"{value / 1e6:.2f}M",
    "p_value": format_p,
    "seeds_above": lambda value: f"{value[0]}/{value[1]}",
}


def fmt(key: str, value) -> str:
    if value is None:
        return "–"
    if key in metric_digits():
        return f"{value:.{metric_digits()[key]}f}"
    return FORMATS.get(key, str)(value)


def cell(key: str, mean, std) -> str:
    if std is None or mean is None or (std == 0 and key in ("params", "steps")):  # same model size/length
        return fmt(key, mean)
    return f"{fmt(key, mean)} ± {fmt(key, std)}"


def has_teacher_forced(groups: Sequence[Configuration]) -> bool:
    return any(g.teacher_forced for g in groups)


def mean_std_cell(stats: Optional[Stats], digits: int = 3, sign: str = "") -> str:
    """A figure's mean ± std over seeds in `digits` (the mean `sign`ed: "+"), "–" when no run has it."""
    if not stats or stats.mean is None:
        return "–"
    return f"{stats.mean:{sign}.{digits}f}" + (f" ± {stats.std:.{digits}f}" if stats.std is not None else "")


def markdown_table(
    groups: Sequence[Configuration], baseline: Optional[Configuration] = None, n_samples: int = 1000
) -> str:
    tf = has_teacher_forced(groups)
    titles = [title for _, title in columns()]
    at = titles.index(numeric_columns()["longer_bleu"]) + 1
    if tf:
        titles.insert(at, TF_COLUMN)
    lines = table_head(titles)
    for g in groups:
        cells = [mark_label(g) + (f" {STALE_MARK}" if any(r.stale_test for r in g.runs) else ""), g.encoding, str(g.n)]
        cells += [
            cell(k, g.mean(k), g.std(k)) + ("†" if g.variant and k in TRAINING else "") for k in numeric_columns()
        ]
        if tf:
            cells.insert(at, mean_std_cell(g.teacher_forced.nll_beyond if g.teacher_forced else None))
        cells.append("baseline" if g.is_baseline else fmt("p_value", g.p_value))
        cells.append("baseline" if g.is_baseline else fmt("seeds_above", g.seeds_above))
        lines.append(table_row(cells))
    runs = [r for g in groups for r in g.runs]
    lines.append("")
    if any(g.variant for g in groups):
        lines.append(
            "†: the base run's training (a row with [settings] is the same trained run, tested with "
            "those test-time settings)."
        )
    lines += spans_note(groups)
    lines += stale_note(runs)
    if any(g.n > 1 for g in groups):
        lines.append("Figures are mean ± sample standard deviation over a configuration's seeds (`seeds`).")
    if baseline is not None and any(g.p_value is not None for g in groups):
        lines.append(
            f"p vs baseline: the seed-level test of test sacreBLEU against `{baseline.label}` over the "
            f"seeds both were run with (Student's t over the per-seed differences, SE² = s_d²/n + v_shared: the "
            f"test set's noise every seed shares, from the sentence bootstrap, added to the seeds' spread, with "
            f"Welch–Satterthwaite degrees of freedom; two-sided, uncorrected; none with one seed) — the findings "
            f"give the intervals, "
            f"the declared family's Holm correction and what the comparison supports."
        )
    if baseline is not None and any(g.seeds_above is not None for g in groups):
        lines.append(
            f"seeds above baseline: runs whose test sacreBLEU is above `{baseline.label}` run with the "
            f"same seed by more than the tie margin, out of the seeds both were run with."
        )
    signatures = sorted({r.scores[SIGNATURE] for r in runs if r.scores.get(SIGNATURE)})
    if signatures:
        lines.append("sacreBLEU signature: " + "; ".join(f"`{s}`" for s in signatures))
    tokenizations = sorted({r.scores["nltk_tokenization"] for r in runs if r.scores.get("nltk_tokenization")})
    if tokenizations:
        lines.append("nltk BLEU-4 is corpus BLEU on word tokens (" + "; ".join(tokenizations) + "), in [0, 1].")
    if tf:
        lines.append(TF_NOTE)
    return "\n".join(lines).rstrip()


def bucket_table(groups: Sequence[Configuration]) -> str:
    """Test sacreBLEU per source-length bucket (subword tokens), one row per configuration; empty if none."""
    rows = [g for g in groups if g.by_source_length]
    if not rows:
        return ""
    labels = [b.bucket for b in rows[0].by_source_length]
    counts = {b.bucket: b.num_sentences for b in rows[0].by_source_length}
    lines = table_head(["config", "encoding", *(f"{lab} (n={counts[lab]})" for lab in labels)])
    for g in rows:
        by = {b.bucket: b for b in g.by_source_length}
        cells = [cell(HEADLINE, by[lab].bleu.mean, by[lab].bleu.std) if lab in by else "–" for lab in labels]
        lines.append(table_row([g.label, g.encoding, *cells]))
    return "Test sacreBLEU by source length (subword tokens):\n\n" + "\n".join(lines)


def teacher_forced_tables(groups: Sequence[Configuration]) -> str:
    """Teacher-forced NLL per target-position bucket and boundary p(EOS) per k ("" when no run has them)."""
    rows = [g for g in groups if g.teacher_forced]
    if not rows:
        return ""
    buckets = sorted({(b.start, b.bucket) for g in rows for b in g.teacher_forced.by_position})
    lines = table_head(["config", "encoding", *(label for _, label in buckets)])
    for g in rows:
        by = {b.start: b.nll for b in g.teacher_forced.by_position}
        lines.append(table_row([g.label, g.encoding, *(mean_std_cell(by.get(lo)) for lo, _ in buckets)]))
    lengths = sorted({g.teacher_forced.training_length for g in rows} - {None})
    text = (
        "Teacher-forced NLL by target position (decoder positions, 0 = BOS; EOS renormalised out, pooled "
        "token-weighted over k = 1 and every joined k, sentence boundaries excluded; mean ± std over seeds"
        + (f"; decoder training length: {', '.join(map(str, lengths))}" if lengths else "")
        + "):\n\n"
        + "\n".join(lines)
    )
    ks = sorted({k for g in rows for k in g.teacher_forced.boundary_p_eos}, key=int)
    if ks:
        lines = table_head(["config", "encoding", *(f"k={k}" for k in ks)])
        lines += [
            table_row([g.label, g.encoding, *(mean_std_cell(g.teacher_forced.boundary_p_eos.get(k)) for k in ks)])
            for g in rows
        ]
        text += (
            "\n\nTeacher-forced p(EOS) at the sentence boundaries of joined inputs (the first reference token of "
            "each later pair, where a single-sentence model wants to stop; mean ± std over seeds):\n\n"
            + "\n".join(lines)
        )
    return text


def sets_table(groups: Sequence[Configuration], sets: Sequence[SetStudy], own: str) -> str:
    """Each configuration's scores on each declared test set (`own`: the name of the configurations' own
    split), beside the sacreBLEU of the sources the family's rows compare there; "" without a file pair."""
    if not sets:
        return ""
    titles = ["test set", "config", "seeds", *(f"test {m.label}" for m in METRICS), "sacreBLEU compared"]
    lines = table_head(titles)

    def row(name: str, g: Configuration, compared: str) -> str:
        return table_row(
            [name, g.label, str(g.n), *(cell(m.name, g.mean(m.name), g.std(m.name)) for m in METRICS), compared]
        )

    lines += [row(f"{own or 'own split'} (own split)", g, "(all)") for g in groups]
    for s in sets:
        rule = s.test_set.max_source_tokens
        for g in s.groups:
            compared, chosen, total = s.compared_bleu(g)
            where = f" (n={total}; compared: {chosen}, sources ≤ {rule} tokens)" if rule else f" (n={total})"
            fewer = f" ({compared.n} seeds)" if compared.n != g.n else ""
            lines.append(row(s.test_set.name + where, g, cell(HEADLINE, compared.mean, compared.std) + fewer))
    return (
        "Scores on each declared test set (test.py's on the whole set; sacreBLEU compared: on the sources the "
        "family's rows compare there, subword tokens as test.py counts them; mean ± std over seeds):\n\n"
        + "\n".join(lines)
    )
