"""The length-extrapolation tables of compare.py: per k (inputs of k consecutive test pairs joined,
`test.py --concat`), each configuration's sacreBLEU and length ratio (mean ± std over its seeds), and
its same-seed wins and p against the baseline as the findings computed them (k = 1 is the test set)."""

from __future__ import annotations

from typing import Callable, Sequence

from study.judge.wording import format_p
from study.pages.summary_tables import fmt, mean_std_cell
from study.read.run_groups import concat_ks
from study.records import ConcatStats, Configuration
from utils.markdown import table_head, table_row


def concat_tables(groups: Sequence[Configuration], baseline: Configuration, n_samples: int = 1000) -> str:
    """Markdown: sacreBLEU per k, length ratio per k, and the comparison with the baseline per k."""
    ks = concat_ks(groups)
    if not ks:
        return ""
    head = table_head(["config", "encoding", *(f"k={k}" for k in ks)])

    def table(render: Callable[[Configuration, ConcatStats], str]) -> str:
        return "\n".join(
            head + [table_row([g.label, g.encoding, *(render(g, g.concat[k]) for k in ks)]) for g in groups]
        )

    def against(g: Configuration, c: ConcatStats) -> str:
        if g.label == baseline.label:
            return "baseline"
        return fmt("seeds_above", c.seeds_above) + (f", p={format_p(c.p_value)}" if c.p_value is not None else "")

    return "\n\n".join(
        [
            "Length extrapolation: test sacreBLEU on inputs of k consecutive test pairs joined "
            "(mean ± std over seeds):\n\n" + table(lambda g, c: mean_std_cell(c.bleu, 2)),
            "Hypothesis/reference length ratio (sacreBLEU's; below 1 = output too short):\n\n"
            + table(lambda g, c: mean_std_cell(c.ratio, 3)),
            f"Against `{baseline.label}` per k: same-seed runs above it by more than the tie margin (seeds/shared "
            f"seeds), and the seed-level p (two-sided, uncorrected; k = 1 is the test set; the findings word them):\n\n"
            + table(against),
        ]
    )
