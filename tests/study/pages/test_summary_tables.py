"""compare.py's main table (study/pages/summary_tables.py): its columns (the training figures, every
registered test metric, then the rest), each figure in its own digits as mean ± std over seeds, the
baseline row and a variant's training columns marked †, and the CSV rows of the same numbers."""

from __future__ import annotations

from study.pages.serialize import csv_rows
from study.pages.summary_tables import cell, columns, fmt, markdown_table
from study.read.run_stats import numeric_columns
from study.records import Configuration, RunRecord, Stats, frozen_map
from utils.metrics import METRICS


def group(label: str, sacrebleu: float, std: float | None, n: int, **extra) -> Configuration:
    given = dict(sacrebleu=(sacrebleu, std), nltk_bleu4=(0.31234, None), params=(2_345_678.0, 0.0))
    given.update(steps=(1000.0, 0.0), valid_loss=(2.5, None))
    stats = frozen_map((k, Stats(*given.get(k, (None, None)), n)) for k in numeric_columns())
    scores = frozen_map({"sacrebleu_signature": "sig"})
    runs = tuple(RunRecord(run=f"{label}_seed{s}", seed=s, scores=scores) for s in range(n))
    return Configuration(runs, label, encoding=label, stats=stats, **extra)


def test_the_columns_put_every_registered_metric_after_the_training_figures() -> None:
    keys = list(numeric_columns())
    assert keys[:3] == ["train_loss", "valid_loss", "valid_accuracy"]
    assert keys[3 : 3 + len(METRICS)] == [m.name for m in METRICS]
    titles = [title for _, title in columns()]
    assert titles[:3] == ["config", "encoding", "seeds"] and titles[-2:] == ["p vs baseline", "seeds above baseline"]


def test_each_figure_in_its_digits() -> None:
    assert fmt("sacrebleu", 27.123) == "27.12" and fmt("nltk_bleu4", 0.312345) == "0.3123"
    assert (
        fmt("params", 2_345_678) == "2.35M" and fmt("steps", 1000.4) == "1000" and fmt("train_minutes", 3.14) == "3.1"
    )
    assert fmt("seeds_above", [3, 5]) == "3/5" and fmt("sacrebleu", None) == "–"
    assert cell("sacrebleu", 27.1, 0.5) == "27.10 ± 0.50" and cell("params", 2e6, 0.0) == "2.00M"


def test_a_row_per_configuration_with_the_baseline_and_a_variant_marked() -> None:
    base = group("sinusoidal", 27.0, 0.4, 3, is_baseline=True)
    rope = group("rope", 28.0, 0.6, 3, p_value=0.0123, seeds_above=(3, 3))
    variant = group("rope [ntk4]", 26.0, None, 1, variant=True)
    table = markdown_table([base, rope, variant])
    lines = table.splitlines()
    assert lines[0].startswith("| config | encoding | seeds | train loss | valid loss | valid acc | test sacreBLEU |")
    assert "| sinusoidal | sinusoidal | 3 |" in lines[2] and lines[2].endswith("| baseline | baseline |")
    assert "28.00 ± 0.60" in lines[3] and "3/3" in lines[3]
    assert "2.5000†" in lines[4] and any(line.startswith("†: the base run's training") for line in lines)
    header, rows = csv_rows([base, rope])
    assert "sacrebleu" in header and "sacrebleu_std" in header and rows[1]["sacrebleu"] == 28.0
