"""Findings: what a comparison of runs supports, worded by one fixed rule, generated from the runs.

For every configuration against the baseline: the length study's degradation (study/
degradation.py: a test pair's NLL inside a joined input minus alone, pooled over k, per k, and by
where the pair starts), the test set, each k of the length protocol (k >= 2; k = 1 *is* the test
set), each source-length bucket (where test.py recorded each sentence's length), and the
teacher-forced NLL beyond the training length. Each row: the per-seed differences over the seeds
both configurations were run with, the seed-level test (study/stats/seed_test.py: the seeds'
spread plus the test set's, Student's t, two-sided) with its 95% interval, and sacreBLEU's own
paired bootstrap p of each seed as a descriptive column (it holds the trained models fixed).

Verdicts: only the study's declared headline comparisons (configs/<study>/findings/headline.yaml) can be
worded "ahead"/"behind", by the rule the family names (study/stats/rules.py) with Holm's correction over
that family alone; every other row says how the seeds fall against the tie margin and gives the
interval (study/judge/wording.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from study.read.degradation import selections
from study.read.run_outputs import StudyOutputs, training_length
from study.read.run_stats import joined_range, joined_training_k
from study.records import ComparisonRow, Configuration, FindingsTable, RowTest, RunRecord, SeedDifference
from study.stats.seed_test import seed_test
from study.stats.significance import paired_bootstrap_ratio, paired_bootstrap_seeds
from study.terms import Joined, LengthBucket, NllBeyond, RowKey, Selection, Table, WholeTestSet

# One rule for every row: tested only when at least this many units (sentences, test pairs or inputs)
# carry its measure; fewer and resampling says little (one: every resample is that unit)
MIN_SENTENCES = 10
Pair = tuple[RunRecord, RunRecord]  # a run and the baseline's run of the same seed
UNKEYED = RowKey("", "", WholeTestSet())  # a row's key until its table and configuration set it (`_keyed`)


def _row(seeds: list, n_units: int, combined, per_seed: list, lower_is_better: bool = False) -> ComparisonRow:
    """A comparison row from the joint bootstrap over seeds (its per-seed differences and the variance
    of their mean) and each seed's own paired bootstrap (its p, descriptive; its variance splits the
    test set's noise into the part every seed shares and the part more seeds average out)."""
    test = seed_test(combined.per_seed, combined.variance, [r.variance for r in per_seed])
    per_seed = tuple(SeedDifference(s, d, r.p_value) for s, d, r in zip(seeds, combined.per_seed, per_seed))
    return ComparisonRow(UNKEYED, tuple(seeds), n_units, per_seed, RowTest(combined.difference, test), lower_is_better)


def _untested(seeds: list, n_units: int, lower_is_better: bool = False) -> ComparisonRow:
    untested = f"not tested (fewer than {MIN_SENTENCES} units carry it)"
    return ComparisonRow(UNKEYED, tuple(seeds), n_units, lower_is_better=lower_is_better, untested=untested)


def compare_ratio(
    systems: list[np.ndarray], baselines: list[np.ndarray], seeds: list, n_samples: int, seed: int
) -> ComparisonRow:
    """A lower-is-better ratio of sums (NLL per token) per unit `[units, 2]`, system vs baseline per seed;
    n counts the units with tokens in some run (the others resample as zeros)."""
    n = int((np.stack([*systems, *baselines])[:, :, 1] > 0).any(0).sum())
    if n < MIN_SENTENCES:
        return _untested(seeds, n, True)
    combined = paired_bootstrap_ratio(systems, baselines, n_samples, seed)
    per_seed = [paired_bootstrap_ratio([m], [b], n_samples, seed) for m, b in zip(systems, baselines)]
    return _row(seeds, n, combined, per_seed, lower_is_better=True)


def compare_nll(pairs: list[Pair], outputs: StudyOutputs, n_samples: int, seed: int) -> Optional[ComparisonRow]:
    """The teacher-forced NLL beyond the training length, pooled over every k; the statistic the
    token-weighted mean NLL. The unit resampled is the test pair (carrying every input that holds
    it) where every run has test.py's per-pair sums, else (runs tested before them) an input of any
    k that has such tokens in either run."""
    seeds = [run.seed for run, _ in pairs]
    if all(outputs.pairs(r) is not None for pair in pairs for r in pair):
        sums = [(outputs.pairs(run).beyond, outputs.pairs(base).beyond) for run, base in pairs]
        if len({x.shape for pair in sums for x in pair}) > 1:
            raise ValueError(
                f"{pairs[0][0].run} and {pairs[0][1].run} were teacher-forced on different test "
                f"sets: their NLL cannot be compared"
            )
        if not any(x[:, 1].sum() for pair in sums for x in pair):
            return None
        return replace(compare_ratio([m for m, _ in sums], [b for _, b in sums], seeds, n_samples, seed), unit="pair")
    sums = [(outputs.beyond(run), outputs.beyond(base)) for run, base in pairs]
    keys = sorted({key for mine, theirs in sums for key in (*mine, *theirs)})
    if not keys:
        return None

    def rows(values: Mapping) -> np.ndarray:
        return np.array([values.get(key, (0.0, 0.0)) for key in keys])  # [inputs, 2]

    return replace(
        compare_ratio([rows(m) for m, _ in sums], [rows(t) for _, t in sums], seeds, n_samples, seed), unit="input"
    )


def compare_degradation(
    pairs: list[Pair], outputs: StudyOutputs, keep, n_samples: int, seed: int
) -> Optional[ComparisonRow]:
    """The degradation of one selection (study/read/degradation.py), system vs baseline per seed; the
    unit resampled is the test pair; every run counts the same (pair, k) cells: those all of them
    scored whole."""
    sums = [outputs.pairs(r) for pair in pairs for r in pair]
    if len({x.num_pairs for x in sums}) > 1:
        raise ValueError(
            f"{pairs[0][0].run} and {pairs[0][1].run} were teacher-forced on different test "
            f"sets (different numbers of pairs): their degradation cannot be compared"
        )
    ks = set.intersection(*(set(x.joined) for x in sums))  # the k every run scored
    allowed = {k: np.logical_and.reduce([x.scored(k) for x in sums]) for k in ks}
    units = [x.units(keep, allowed) for x in sums]
    systems, baselines = units[0::2], units[1::2]
    if any(x[:, 1].sum() <= 0 for x in units):
        return None
    return compare_ratio(systems, baselines, [r.seed for r, _ in pairs], n_samples, seed)


def _pairs(group: Configuration, baseline: Configuration, has: Callable[[RunRecord], bool]) -> list[Pair]:
    """(run, baseline run) of every seed both configurations ran with outputs for this comparison,
    one pair per seed (a seed run twice counts once: its first run; a stale test is none)."""
    base = _first_by_seed(r for r in baseline.runs if r.seed is not None and not r.stale_test and has(r))
    mine = _first_by_seed(r for r in group.runs if r.seed in base and not r.stale_test and has(r))
    return [(r, base[seed]) for seed, r in mine.items()]


def _first_by_seed(runs: Iterable[RunRecord]) -> Mapping[Any, RunRecord]:
    """{seed: its first run}, in order."""
    out: dict = {}
    for r in runs:
        out[r.seed] = out.get(r.seed, r)
    return out


def compare_pair(
    pairs: list[Pair],
    outputs: StudyOutputs,
    k: int,
    n_samples: int,
    seed: int,
    bucket: Optional[tuple[int, Optional[int]]] = None,
) -> Optional[ComparisonRow]:
    """Test sacreBLEU (k = 1), or on the k-inputs, of a configuration against the baseline over shared seeds."""
    systems, baselines, subsets, seeds = [], [], [], []
    for run, base in pairs:
        (mine, refs), (theirs, base_refs) = outputs.get(run, k), outputs.get(base, k)
        if refs != base_refs:
            raise ValueError(
                f"{run.run} and {base.run} were scored on different references "
                f"({'test set' if k == 1 else f'k={k}'}): they cannot be compared"
            )
        subset = None
        if bucket is not None:
            lengths = outputs.lengths(run)
            if lengths != outputs.lengths(base) or lengths is None or len(lengths) != len(refs):
                continue  # no (or differing) per-sentence lengths: this bucket is not tested for the pair
            lo, hi = bucket
            subset = np.array([n >= lo and (hi is None or n <= hi) for n in lengths])
        systems.append(mine)
        baselines.append(theirs)
        subsets.append(subset)
        seeds.append(run.seed)
    if not seeds:
        return None
    if bucket is not None:  # one subset for all seeds (the same sources): select before testing
        systems = [s[m] for s, m in zip(systems, subsets)]
        baselines = [b[m] for b, m in zip(baselines, subsets)]
    n = len(systems[0])
    if n < MIN_SENTENCES:
        return _untested(seeds, n)
    combined = paired_bootstrap_seeds(systems, baselines, n_samples, seed)
    per_seed = [paired_bootstrap_seeds([s], [b], n_samples, seed) for s, b in zip(systems, baselines)]
    return _row(seeds, n, combined, per_seed)


def _table(name: Table, title: str, rows: Callable[[Table], list[ComparisonRow]]) -> FindingsTable:
    """The table `name` of the rows `rows(name)` (each keyed by its table), in its measure."""
    return FindingsTable(name, title, name.measure, tuple(rows(name)))


DEGRADATION_TITLE = (
    "degradation: a test pair's teacher-forced NLL inside an input of k joined "
    "pairs minus alone, per token (EOS renormalised out), the same tokens"
)
NLL_BEYOND_TITLE = (
    "teacher-forced NLL (EOS renormalised out) at target positions beyond "
    "the training length, inputs of every k (absolute: it mixes model quality with "
    "extrapolation)"
)


@dataclass(frozen=True)
class Comparison:
    """What every row of one findings report is compared in: the runs' outputs (read before, once:
    study/read/run_outputs.read_outputs), the run folders trained from a commit that declared the family
    (study/read/declared.py; None without a family file: nothing to prove) and the bootstrap's samples
    and seed."""

    outputs: StudyOutputs
    proven: Optional[frozenset[str]]
    n_samples: int
    seed: int

    def from_declaring_commit(self, pairs: Sequence[Pair]) -> bool:
        return self.proven is None or all(r.run in self.proven for pair in pairs for r in pair)


def findings_tables(
    groups: Sequence[Configuration], baseline: Configuration, context: Comparison
) -> list[FindingsTable]:
    """The findings tables (not yet worded) of every configuration against `baseline`."""
    others = [g for g in groups if g.label != baseline.label]
    ks = sorted({k for g in groups for r in g.runs for k in r.concat if k > 1})
    buckets = next((r.by_source_length for r in baseline.runs if r.by_source_length), ())
    lengths = {r.seed: training_length(r) for r in baseline.runs}

    def same_length(r: RunRecord) -> bool:  # "beyond" is then the same tokens of the same inputs
        return training_length(r) is not None and training_length(r) == lengths.get(r.seed)

    def rows(comparisons: list[tuple[Selection, int, Optional[tuple]]]) -> Callable[[str], list[ComparisonRow]]:
        return partial(bleu_rows, others, baseline, context, comparisons)

    tables = [
        _table(Table.DEGRADATION, DEGRADATION_TITLE, partial(degradation_rows, others, baseline, context, same_length)),
        _table(Table.TEST, "test set", rows([(WholeTestSet(), 1, None)])),
    ]
    if ks:
        tables.append(_table(Table.CONCAT, "inputs of k test pairs joined", rows([(Joined(k), k, None) for k in ks])))
    if buckets:
        tables.append(
            _table(
                Table.BUCKETS,
                "test set by source length (subword tokens)",
                rows([(LengthBucket(b.bucket), 1, (b.min_len, b.max_len)) for b in buckets]),
            )
        )
    nll_rows = partial(nll_beyond_rows, others, baseline, context, same_length)
    tables.append(_table(Table.TEACHER_FORCED, NLL_BEYOND_TITLE, nll_rows))
    return [t for t in tables if t.rows]


def _keyed(
    key: RowKey,
    group: Configuration,
    result: ComparisonRow,
    pairs: Sequence[Pair],
    k: Optional[int],
    context: Comparison,
    joined: int = 1,
) -> ComparisonRow:
    """A row: its key (table, configuration, on what), where k sits against its joined-pair training
    range, and whether every run of it was trained from a commit that declared the study's family
    (`Comparison.proven`)."""
    return replace(
        result,
        key=key,
        encoding=group.encoding,
        joined_range=joined_range(joined, k),
        from_declaring_commit=context.from_declaring_commit(pairs),
    )


def _joined(group: Configuration, baseline: Configuration) -> int:
    return max(joined_training_k(r) for r in (*group.runs[:1], *baseline.runs[:1]))


def bleu_rows(
    others: Sequence[Configuration], baseline: Configuration, context: Comparison, comparisons: list, table: str
) -> list[ComparisonRow]:
    """Each configuration against the baseline on each (selection, k, source-length bucket) comparison."""
    out, outputs = [], context.outputs
    for g in others:
        for on, k, bucket in comparisons:
            pairs = _pairs(g, baseline, lambda r, k=k: outputs.get(r, k) is not None)
            result = compare_pair(pairs, outputs, k, context.n_samples, context.seed, bucket) if pairs else None
            if result is not None:
                out.append(_keyed(RowKey(table, g.label, on), g, result, pairs, k, context, _joined(g, baseline)))
    return out


def degradation_rows(
    others: Sequence[Configuration], baseline: Configuration, context: Comparison, same_length, table: str
) -> list[ComparisonRow]:
    """Each configuration's degradation against the baseline's, per selection of (pair, k) cells."""
    rows, outputs = [], context.outputs
    for g in others:
        pairs = _pairs(g, baseline, lambda r: outputs.pairs(r) is not None)
        if not pairs:
            continue
        joined = _joined(g, baseline)
        for span, keep, needs_length in selections(outputs.pairs(pairs[0][0]), joined_k=joined):
            chosen = [(r, b) for r, b in pairs if not needs_length or same_length(r)]
            result = compare_degradation(chosen, outputs, keep, context.n_samples, context.seed) if chosen else None
            if result is not None:
                rows.append(_keyed(RowKey(table, g.label, span), g, result, chosen, span.at_k, context, joined))
    return rows


def nll_beyond_rows(
    others: Sequence[Configuration], baseline: Configuration, context: Comparison, same_length, table: str
) -> list[ComparisonRow]:
    """The encoding itself, whatever the search does: the references' NLL beyond training, all k."""
    rows, outputs = [], context.outputs
    for g in others:
        pairs = _pairs(g, baseline, lambda r: outputs.beyond(r) is not None and same_length(r))
        result = compare_nll(pairs, outputs, context.n_samples, context.seed) if pairs else None
        if result is not None:
            rows.append(_keyed(RowKey(table, g.label, NllBeyond()), g, result, pairs, None, context))
    return rows
