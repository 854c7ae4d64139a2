"""The length-extrapolation table of compare.py: for each k (inputs of k consecutive test pairs
joined, written by `test.py --concat`), each configuration's test sacreBLEU and hypothesis/
reference length ratio as mean ± std over its seeds, how many same-seed runs beat the baseline,
and the p-value against the baseline that the findings computed (study/judge/findings.py: over all
seeds both ran; k = 1 is the test set itself).

Input: compare.py's configurations (study/records.py), each run carrying its `concat` scores per k
and its folder. Runs are compared at a k only when they were scored on the same joined inputs (same
references), as compare.py does for the test set.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional, Sequence

from study.judge.wording import format_p
from study.read.run_stats import seed_wins, stats, test_folder
from study.records import ConcatStats, Configuration, RunRecord, frozen_map
from utils import run_files
from utils.markdown import table_head, table_row
from utils.stored_files import read_lines


def concat_ks(groups: Sequence[Configuration]) -> list[int]:
    """Every k scored by at least one run, ascending."""
    return sorted({k for g in groups for r in g.runs for k in r.concat})


def _k_outputs(run: RunRecord, k: int) -> tuple[Optional[list[str]], Optional[list[str]]]:
    folder = test_folder(run) / "concat" / f"k{k}"
    return read_lines(folder / run_files.HYPOTHESES), read_lines(folder / run_files.REFERENCES)


def check_same_inputs(groups: Sequence[Configuration]) -> None:
    """Runs averaged or compared at one k must have been scored on the same k-inputs (the same
    test set, the same joining order): otherwise raise ValueError naming two runs that differ."""
    for k in concat_ks(groups):
        first = None
        for r in (r for g in groups for r in g.runs if k in r.concat):
            refs = _k_outputs(r, k)[1]
            if refs is None:
                continue
            if first is None:
                first = (r.run, refs)
            elif refs != first[1]:
                raise ValueError(
                    f"the k={k} references differ between {first[0]} and {r.run}: runs scored on "
                    f"different joined inputs (another test set or evaluation.concat_seed) cannot be "
                    f"compared (pass --no_significance to tabulate them anyway)"
                )


def add_concat_stats(
    groups: Sequence[Configuration], baseline: Configuration, check_inputs: bool = True, margin: float = 0.0
) -> list[Configuration]:
    """Each group with its `concat` = {k: ConcatStats} for every k some run scored (p_value None
    here: compare.py copies it from the findings, study/run_groups.add_significance)."""
    if check_inputs:
        check_same_inputs(groups)
    ks = concat_ks(groups)

    def at(g: Configuration, k: int) -> ConcatStats:
        scored = [r.concat[k] for r in g.runs if k in r.concat]
        bleu, ratio = stats([x.sacrebleu for x in scored]), stats([x.length_ratio for x in scored])
        wins = None if g.label == baseline.label else seed_wins(g.runs, baseline.runs, bleu_at(k), margin)
        return ConcatStats(bleu.mean, bleu.std, ratio.mean, ratio.std, bleu.n, seeds_above=wins)

    return [replace(g, concat=frozen_map((k, at(g, k)) for k in ks)) if ks else g for g in groups]


def bleu_at(k: int) -> Callable[[RunRecord], Optional[float]]:
    """A run's test sacreBLEU on the inputs of k joined pairs (None where it did not score them)."""
    return lambda r: r.concat[k].sacrebleu if k in r.concat else None


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
            "(mean ± std over seeds):\n\n" + table(lambda g, c: _cell(c.bleu, c.bleu_std, 2)),
            "Hypothesis/reference length ratio (sacreBLEU's; below 1 = output too short):\n\n"
            + table(lambda g, c: _cell(c.ratio, c.ratio_std, 3)),
            f"Against `{baseline.label}` per k: same-seed runs above it by more than the tie margin (seeds/shared "
            f"seeds), and the seed-level p (two-sided, uncorrected; k = 1 is the test set; the findings word them):\n\n"
            + table(against),
        ]
    )
