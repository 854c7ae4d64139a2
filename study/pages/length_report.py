"""The length-extrapolation table of compare.py: for each k (inputs of k consecutive test pairs
joined, written by `test.py --concat`), each configuration's test sacreBLEU and hypothesis/
reference length ratio as mean ± std over its seeds, how many same-seed runs beat the baseline,
and the p-value against the baseline that the findings computed (study/judge/findings.py: over all
seeds both ran; k = 1 is the test set itself).

Input: compare.py's configurations (study/records.py), each with its `concat` statistics per k
(study/read/run_groups.py: add_concat_stats, which compares runs at a k only when they were scored on
the same joined inputs, same references, as compare.py does for the test set).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from study.judge.wording import format_p
from study.read.run_groups import concat_ks
from study.records import ConcatStats, Configuration
from utils.markdown import table_head, table_row


def _cell(mean: Optional[float], std: Optional[float], digits: int) -> str:
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def concat_tables(groups: Sequence[Configuration], baseline: Configuration, n_samples: int = 1000) -> str:
    """Markdown: sacreBLEU per k, length ratio per k, and the comparison with the baseline per k."""
    ks = concat_ks(groups)
    if not ks:
        return ""
    head = table_head(["config", "encoding", *(f"k={k}" for k in ks)])

    def table(render: Callable[[Configuration, ConcatStats], str]) -> str:
        rows = [table_row([g.label, g.encoding, *(render(g, g.concat[k]) for k in ks)]) for g in groups]
        return "\n".join(head + rows)

    def against(g: Configuration, c: ConcatStats) -> str:
        if g.label == baseline.label:
            return "baseline"
        wins = f"{c.seeds_above[0]}/{c.seeds_above[1]}" if c.seeds_above else "–"
        return wins + (f", p={format_p(c.p_value)}" if c.p_value is not None else "")

    return "\n\n".join(
        [
            "Length extrapolation: test sacreBLEU on inputs of k consecutive test pairs joined "
            "(mean ± std over seeds):\n\n" + table(lambda g, c: _cell(c.bleu.mean, c.bleu.std, 2)),
            "Hypothesis/reference length ratio (sacreBLEU's; below 1 = output too short):\n\n"
            + table(lambda g, c: _cell(c.ratio.mean, c.ratio.std, 3)),
            f"Against `{baseline.label}` per k: same-seed runs above it by more than the tie margin (seeds/shared "
            f"seeds), and the seed-level p (two-sided, uncorrected; k = 1 is the test set; the findings word them):\n\n"
            + table(against),
        ]
    )
