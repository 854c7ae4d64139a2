"""The degradation table of compare.py (the length study's headline measure, study/read/degradation.py)
and how a run's NLL alone goes with its degradation, within configurations (Pearson's r)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from study.judge.wording import format_p
from study.pages.summary_tables import mean_std_cell
from study.read.degradation import ALONE
from study.read.run_stats import joined_training_k
from study.records import Configuration
from study.terms import ALL_K
from utils.markdown import table_head, table_row


@dataclass(frozen=True)
class Correlation:
    """Pearson's r within configurations, over `runs` runs of `configs` configurations."""

    r: float
    runs: int
    configs: int
    df: int
    p: float


def alone_correlation(groups: Sequence[Configuration]) -> Optional[Correlation]:
    """Within configurations: Pearson's r between a run's NLL alone and its degradation pooled over k,
    each as the run's deviation from its configuration's mean (configurations with two runs or more;
    variants, the same trained runs tested again, left out). None under three such runs."""
    xs, ys, configs = [], [], 0
    for g in groups:
        runs = [d for d in g.degradation_runs if d and ALONE in d and ALL_K in d]
        if g.variant or len(runs) < 2:
            continue
        configs += 1
        alone, degradation = np.array([d[ALONE] for d in runs]), np.array([d[ALL_K] for d in runs])
        xs += list(alone - alone.mean())
        ys += list(degradation - degradation.mean())
    df = len(xs) - configs - 1  # each configuration's mean took one degree of freedom
    if df < 1 or np.std(xs) == 0 or np.std(ys) == 0:
        return None
    from scipy.stats import t

    r = float(np.corrcoef(xs, ys)[0, 1])
    p = 0.0 if abs(r) >= 1 else float(2 * t.sf(abs(r) * np.sqrt(df / (1 - r * r)), df))
    return Correlation(r, len(xs), configs, df, p)


def alone_sentence(corr: Optional[Correlation], trained_on: str = "") -> str:
    """What the within-configuration correlation says: r with its p (Pearson's t-test, two-sided), and
    a relation worded only where p < 0.05."""
    if corr is None:
        return ""
    r, p = corr.r, corr.p
    if p >= 0.05:
        meaning = "not distinguishable from no relation at these seeds"
    elif r < 0:
        meaning = (
            "a run that predicts the pairs worse alone degrades less inside joins, so a model that is better at "
            "k = 1 can look worse on this measure"
        )
    else:
        meaning = "a run that predicts the pairs worse alone also degrades more inside joins"
    return (
        f"Within configurations{trained_on} (each run against its configuration's mean), a run's NLL alone "
        f"(k = 1, the same tokens) and its degradation pooled over k correlate r = {r:+.2f} over {corr.runs} "
        f"runs of {corr.configs} configuration{'s' if corr.configs != 1 else ''} (p {format_p(p)}, two-sided, "
        f"{corr.df} degrees of freedom): {meaning}."
    )


def alone_sentences(groups: Sequence[Configuration]) -> list[str]:
    """`alone_sentence` for the configurations trained on single sentences and, apart (joined-pair
    training changes what a join is to the model), for those trained on joined pairs."""
    kinds = {" trained on single sentences": False, " trained on joined pairs": True}
    said = [
        alone_sentence(alone_correlation([g for g in groups if (joined_training_k(g.runs[0]) > 1) == joined]), kind)
        for kind, joined in kinds.items()
    ]
    return [s for s in said if s]


def degradation_table(groups: Sequence[Configuration]) -> str:
    """Each configuration's degradation pooled over k, per k and by where the pair starts ("": none)."""
    have = [g for g in groups if g.degradation]
    if not have:
        return ""
    spans = list(dict.fromkeys(span for g in have for span in g.degradation))
    lines = [
        "Degradation: a test pair's teacher-forced NLL inside an input of k joined pairs minus the same tokens' "
        "NLL alone, nats per token (EOS renormalised out; mean ± std over seeds; lower is better):",
        "",
        *table_head(["config", "seeds", *(span.column for span in spans)]),
    ]
    for g in have:
        n = max(s.n for s in g.degradation.values())
        lines.append(table_row([g.label, n, *(mean_std_cell(g.degradation.get(x), sign="+") for x in spans)]))
    return "\n".join(lines + [x for s in alone_sentences(groups) for x in ("", s)])
