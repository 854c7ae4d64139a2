"""Findings: each configuration against the baseline, tested over seeds (the rows, not yet worded).

The tables: the length study's degradation (study/read/degradation.py), the test set, each k >= 2 of
the length protocol (k = 1 *is* the test set), each source-length bucket, and the teacher-forced NLL
beyond the training length. Each row: the per-seed differences over the seeds both configurations
ran, the seed-level test (study/stats/seed_test.py: the seeds' spread plus the test set's, Student's
t, two-sided) with its 95% interval, and sacreBLEU's own paired bootstrap p of each seed as a
descriptive column (it holds the trained models fixed). Verdicts: study/judge/verdicts.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from study.read.degradation import selections
from study.read.run_outputs import Bucket, StudyOutputs, in_bucket, training_length
from study.read.run_stats import joined_training_k
from study.records import ComparisonRow, Configuration, FindingsTable, RowTest, RunRecord, SeedDifference
from study.stats.seed_test import MIN_SENTENCES, seed_test
from study.stats.significance import paired_bootstrap_ratio, paired_bootstrap_seeds
from study.terms import Joined, LengthBucket, NllBeyond, RowKey, Selection, Table, WholeTestSet

# One rule for every row: tested only when at least this many units (sentences, test pairs or inputs)
# carry its measure; fewer and resampling says little (one: every resample is that unit)
Pair = tuple[RunRecord, RunRecord]  # a run and the baseline's run of the same seed
UNKEYED = RowKey("", "", WholeTestSet())  # a row's key until `_Rows.keyed` sets it


def _tested(
    bootstrap: Callable, systems: list, baselines: list, seeds: list, n: int, n_samples: int, seed: int, lower=False
) -> ComparisonRow:
    """A row from the joint bootstrap over seeds (per-seed differences, the variance of their mean) and
    each seed's own (its p, descriptive; its variance splits the test set's noise into the part every
    seed shares and the part more seeds average out); `lower`: lower is better."""
    if n < MIN_SENTENCES:
        return ComparisonRow(UNKEYED, tuple(seeds), n, lower_is_better=lower)
    combined = bootstrap(systems, baselines, n_samples, seed)
    each = [bootstrap([s], [b], n_samples, seed) for s, b in zip(systems, baselines)]
    test = seed_test(combined.per_seed, combined.variance, [r.variance for r in each])
    per_seed = tuple(SeedDifference(s, d, r.p_value) for s, d, r in zip(seeds, combined.per_seed, each))
    return ComparisonRow(UNKEYED, tuple(seeds), n, per_seed, RowTest(combined.difference, test), lower)


def compare_ratio(
    systems: list[np.ndarray], baselines: list[np.ndarray], seeds: list, n_samples: int, seed: int
) -> ComparisonRow:
    """A lower-is-better ratio of sums (NLL per token) per unit `[units, 2]`, system vs baseline per seed;
    n counts the units with tokens in some run (the others resample as zeros)."""
    n = int((np.stack([*systems, *baselines])[:, :, 1] > 0).any(0).sum())
    return _tested(paired_bootstrap_ratio, systems, baselines, seeds, n, n_samples, seed, lower=True)


def compare_nll(pairs: list[Pair], outputs: StudyOutputs, n_samples: int, seed: int) -> Optional[ComparisonRow]:
    """The token-weighted mean NLL beyond the training length, pooled over every k. The unit resampled
    is the test pair (carrying every input that holds it) where every run has test.py's per-pair sums,
    else (runs tested before them) an input of any k that has such tokens in either run."""
    if all(outputs.pairs(r) is not None for pair in pairs for r in pair):
        sums, unit = [(outputs.pairs(run).beyond, outputs.pairs(base).beyond) for run, base in pairs], "pair"
        if len({x.shape for pair in sums for x in pair}) > 1:
            raise ValueError(
                f"{pairs[0][0].run} and {pairs[0][1].run} were teacher-forced on different test "
                f"sets: their NLL cannot be compared"
            )
        if not any(x[:, 1].sum() for pair in sums for x in pair):
            return None
    else:
        by_input = [(outputs.beyond(run), outputs.beyond(base)) for run, base in pairs]
        keys = sorted({key for mine, theirs in by_input for key in (*mine, *theirs)})
        if not keys:
            return None
        sums = [[np.array([x.get(key, (0.0, 0.0)) for key in keys]) for x in pair] for pair in by_input]  # [inputs, 2]
        unit = "input"
    row = compare_ratio([m for m, _ in sums], [b for _, b in sums], [run.seed for run, _ in pairs], n_samples, seed)
    return replace(row, unit=unit)


def compare_degradation(
    pairs: list[Pair], outputs: StudyOutputs, keep, n_samples: int, seed: int
) -> Optional[ComparisonRow]:
    """The degradation of one selection, system vs baseline per seed; the unit resampled is the test
    pair; every run counts the same (pair, k) cells: those all of them scored whole."""
    sums = [outputs.pairs(r) for pair in pairs for r in pair]
    if len({x.num_pairs for x in sums}) > 1:
        raise ValueError(
            f"{pairs[0][0].run} and {pairs[0][1].run} were teacher-forced on different test "
            f"sets (different numbers of pairs): their degradation cannot be compared"
        )
    ks = set.intersection(*(set(x.joined) for x in sums))  # the k every run scored
    allowed = {k: np.logical_and.reduce([x.scored(k) for x in sums]) for k in ks}
    units = [x.units(keep, allowed) for x in sums]
    if any(x[:, 1].sum() <= 0 for x in units):
        return None
    return compare_ratio(units[0::2], units[1::2], [r.seed for r, _ in pairs], n_samples, seed)


def _pairs(group: Configuration, baseline: Configuration, has: Callable[[RunRecord], bool]) -> list[Pair]:
    """(run, baseline run) of every seed both ran with outputs for this comparison (a seed run twice:
    its first run; a stale test is none)."""
    base = _first_by_seed(r for r in baseline.runs if r.seed is not None and not r.stale_test and has(r))
    mine = _first_by_seed(r for r in group.runs if r.seed in base and not r.stale_test and has(r))
    return [(r, base[seed]) for seed, r in mine.items()]


def _first_by_seed(runs: Iterable[RunRecord]) -> Mapping[Any, RunRecord]:
    out: dict = {}
    for r in runs:
        out[r.seed] = out.get(r.seed, r)
    return out


def compare_pair(
    pairs: list[Pair], outputs: StudyOutputs, k: int, n_samples: int, seed: int, bucket: Optional[Bucket] = None
) -> Optional[ComparisonRow]:
    """Test sacreBLEU (k = 1), or on the k-inputs, of a configuration against the baseline over shared seeds."""
    systems, baselines, seeds = [], [], []
    for run, base in pairs:
        (mine, refs), (theirs, base_refs) = outputs.get(run, k), outputs.get(base, k)
        if refs != base_refs:
            raise ValueError(
                f"{run.run} and {base.run} were scored on different references "
                f"({'test set' if k == 1 else f'k={k}'}): they cannot be compared"
            )
        if bucket is not None:  # the same sources for all seeds: one selection before testing
            lengths = outputs.lengths(run)
            if lengths != outputs.lengths(base) or lengths is None or len(lengths) != len(refs):
                continue  # no (or differing) per-sentence lengths: this bucket is not tested for the pair
            chosen = in_bucket(lengths, bucket)
            mine, theirs = mine[chosen], theirs[chosen]
        systems.append(mine)
        baselines.append(theirs)
        seeds.append(run.seed)
    if not seeds:
        return None
    return _tested(paired_bootstrap_seeds, systems, baselines, seeds, len(systems[0]), n_samples, seed)


DEGRADATION_TITLE = (
    "degradation: a test pair's teacher-forced NLL inside an input of k joined "
    "pairs minus alone, per token (EOS renormalised out), the same tokens"
)
NLL_BEYOND_TITLE = (
    "teacher-forced NLL (EOS renormalised out) at target positions beyond the training length, inputs of every k "
    "(absolute: it mixes model quality with extrapolation)"
)


@dataclass(frozen=True)
class Comparison:
    """What every row of one findings report is compared in: the runs' outputs (read once), the run
    folders trained from a commit that declared the family (study/read/declared.py; None without a
    family file: nothing to prove), the bootstrap's samples and seed, and the test folders whose
    recorded test commit did not declare the family."""

    outputs: StudyOutputs
    proven: Optional[frozenset[str]]
    n_samples: int
    seed: int
    tested_off: frozenset[str] = frozenset()

    def from_declaring_commit(self, pairs: Sequence[Pair]) -> bool:
        return self.proven is None or all(r.run in self.proven for pair in pairs for r in pair)

    def tested_at_declaring_commit(self, pairs: Sequence[Pair]) -> bool:
        return not any(r.test_dir in self.tested_off for pair in pairs for r in pair)


Found = Iterable[tuple[Configuration, Selection, Sequence[Pair], ComparisonRow, int]]  # (..., the joined training k)


@dataclass(frozen=True)
class _Rows:
    """The rows of each configuration of `others` against `baseline`: each builder yields (configuration,
    selection, pairs, row, where it sits against the joined-pair training range), `keyed` keys them."""

    others: Sequence[Configuration]
    baseline: Configuration
    context: Comparison

    def same_length(self, r: RunRecord) -> bool:  # "beyond" is then the same tokens of the same inputs
        lengths = {b.seed: training_length(b) for b in self.baseline.runs}
        return training_length(r) is not None and training_length(r) == lengths.get(r.seed)

    def joined(self, group: Configuration) -> int:
        return max(joined_training_k(r) for r in (*group.runs[:1], *self.baseline.runs[:1]))

    def keyed(self, table: Table, found: Found) -> tuple[ComparisonRow, ...]:
        """Each row with its key and whether every run of it was trained (and, where its test records
        it, tested) at a commit that declared the study's family."""
        return tuple(
            replace(
                row,
                key=RowKey(table, g.label, on),
                encoding=g.encoding,
                joined_k=joined,
                from_declaring_commit=self.context.from_declaring_commit(pairs),
                tested_at_declaring_commit=self.context.tested_at_declaring_commit(pairs),
            )
            for g, on, pairs, row, joined in found
        )

    def bleu(self, comparisons: list[tuple[Selection, int, Optional[Bucket]]]) -> Found:
        """Each configuration on each (selection, k, source-length bucket) comparison."""
        c = self.context
        for g in self.others:
            for on, k, bucket in comparisons:
                pairs = _pairs(g, self.baseline, lambda r, k=k: c.outputs.get(r, k) is not None)
                result = compare_pair(pairs, c.outputs, k, c.n_samples, c.seed, bucket) if pairs else None
                if result is not None:
                    yield g, on, pairs, result, self.joined(g)

    def degradation(self) -> Found:
        """Each configuration's degradation against the baseline's, per selection of (pair, k) cells."""
        c = self.context
        for g in self.others:
            pairs = _pairs(g, self.baseline, lambda r: c.outputs.pairs(r) is not None)
            joined = self.joined(g)
            for span, keep, needs_length in selections(c.outputs.pairs(pairs[0][0]), joined_k=joined) if pairs else ():
                chosen = [(r, b) for r, b in pairs if not needs_length or self.same_length(r)]
                result = compare_degradation(chosen, c.outputs, keep, c.n_samples, c.seed) if chosen else None
                if result is not None:
                    yield g, span, chosen, result, joined

    def nll_beyond(self) -> Found:
        """The encoding itself, whatever the search does: the references' NLL beyond training, all k."""
        c = self.context
        for g in self.others:
            pairs = _pairs(g, self.baseline, lambda r: c.outputs.beyond(r) is not None and self.same_length(r))
            result = compare_nll(pairs, c.outputs, c.n_samples, c.seed) if pairs else None
            if result is not None:
                yield g, NllBeyond(), pairs, result, 1


@dataclass(frozen=True)
class OnSet:
    """A declared file pair's configurations, baseline and context (its outputs); `longest`: its length rule."""

    name: str
    groups: Sequence[Configuration]
    baseline: Configuration
    context: Comparison
    longest: Optional[int] = None  # sources of at most this many subword tokens are compared (None: all)

    def rows(self) -> Found:
        others = [g for g in self.groups if g.label != self.baseline.label]
        bucket = None if self.longest is None else (0, self.longest)
        return _Rows(others, self.baseline, self.context).bleu([(WholeTestSet(self.name), 1, bucket)])


def findings_tables(
    groups: Sequence[Configuration], baseline: Configuration, context: Comparison, sets: Sequence[OnSet] = ()
) -> list[FindingsTable]:
    """The findings tables (not yet worded) of every configuration against `baseline`, the test table also
    on each declared file pair (`sets`); a table with no row (no k > 1 run, no source lengths recorded,
    ...) is left out."""
    rows = _Rows([g for g in groups if g.label != baseline.label], baseline, context)
    ks = sorted({k for g in groups for r in g.runs for k in r.concat if k > 1})
    buckets = next((r.by_source_length for r in baseline.runs if r.by_source_length), ())
    by_length = [(LengthBucket(b.bucket), 1, (b.min_len, b.max_len)) for b in buckets]
    tables = [
        (Table.DEGRADATION, DEGRADATION_TITLE, rows.degradation()),
        (Table.TEST, "test set", chain(rows.bleu([(WholeTestSet(), 1, None)]), *(s.rows() for s in sets))),
        (Table.CONCAT, "inputs of k test pairs joined", rows.bleu([(Joined(k), k, None) for k in ks])),
        (Table.BUCKETS, "test set by source length (subword tokens)", rows.bleu(by_length)),
        (Table.TEACHER_FORCED, NLL_BEYOND_TITLE, rows.nll_beyond()),
    ]
    tables = [FindingsTable(name, title, name.measure, rows.keyed(name, found)) for name, title, found in tables]
    return [t for t in tables if t.rows]
