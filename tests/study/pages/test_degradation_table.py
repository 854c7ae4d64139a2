"""The degradation table's sentence (study/pages/degradation_table.py): a run's NLL alone against its
degradation, correlated within configurations (a variant's runs left out), and said only when it is
distinguishable from no relation."""

from __future__ import annotations

from dataclasses import replace

from study.records import Configuration
from study.terms import ALL_K


def test_nll_alone_and_degradation_are_correlated_within_configurations():
    from study.pages.degradation_table import alone_correlation, alone_sentence
    from study.read.degradation import ALONE

    # two configurations whose means differ a lot; within each, a worse NLL alone goes with less degradation
    def runs(alone, degradation):
        return [{ALONE: a, ALL_K: d} for a, d in zip(alone, degradation)]

    def group(alone, degradation, variant=False) -> Configuration:
        return Configuration((), "x", variant=variant, degradation_runs=runs(alone, degradation))

    groups = [
        group([2.0, 2.1, 2.2], [0.50, 0.45, 0.40]),
        group([3.0, 3.1, 3.2], [0.90, 0.86, 0.80]),
        group([9.0, 0.0, 5.0], [0.0, 9.0, 1.0], variant=True),  # the same runs: left out
    ]
    corr = alone_correlation(groups)
    assert corr.runs == 6 and corr.configs == 2 and corr.r < -0.95  # pooled over configs it is > 0
    assert corr.df == 3 and corr.p < 0.05
    said = alone_sentence(corr)
    assert f"r = {corr.r:+.2f} over 6 runs of 2 configurations (p " in said and "degrades less" in said
    weak = alone_sentence(replace(corr, r=-0.39, p=0.08, df=19))
    assert "not distinguishable from no relation" in weak and "degrades less" not in weak
    assert alone_correlation([]) is None and alone_sentence(None) == ""
    flat = [group([2.0, 2.1, 2.2], [0.5, 0.5, 0.5])]
    assert alone_correlation(flat) is None  # no spread: no r
