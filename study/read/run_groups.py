"""The runs' records grouped into one `Configuration` per configuration (its seeds), the baseline
picked and marked, and the per-seed statistics every table and finding uses (seed wins, the bucket and
teacher-forced pools, each k once the runs are known to share its joined inputs). Each function
returns new configurations; none is written into."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Iterable, Optional, Sequence

from study.read.degradation import degradation_stats, run_degradation
from study.read.run_outputs import output_lines
from study.read.run_records import CompareError, config_label
from study.read.run_stats import numeric_columns, seed_wins, stats, test_folder
from study.records import (
    BucketStats,
    ConcatStats,
    Configuration,
    PositionNll,
    RunRecord,
    TeacherForcedStats,
    frozen_map,
)
from utils import run_files
from utils.metrics import HEADLINE
from utils.stored_files import read_lines


def group_runs(rows: Sequence[RunRecord]) -> list[Configuration]:
    """One configuration per group key (config equal except seed/name/run_dir), in order of first
    appearance, its runs by seed; labels told apart where two configurations share a name."""
    keyed: dict[str, list[RunRecord]] = {}
    for row in rows:
        keyed[row.group_key] = [*keyed.get(row.group_key, []), row]
    order = [
        tuple(sorted(runs, key=lambda r: (r.seed is None, r.seed if r.seed is not None else 0, r.run)))
        for runs in keyed.values()
    ]
    names = [config_label(runs[0].name) for runs in order]
    counts = Counter(names)
    # two configurations with one name (e.g. different --set): told apart by folder, then by number
    labels = [f"{x} ({config_label(runs[0].run)})" if counts[x] > 1 else x for x, runs in zip(names, order)]
    labels = [f"{x} #{i + 1}" if labels.count(x) > 1 else x for i, x in enumerate(labels)]
    return [configuration(runs, label, name) for runs, label, name in zip(order, labels, names)]


def configuration(runs: tuple[RunRecord, ...], label: str, name: str = "") -> Configuration:
    """A configuration of `runs` (sorted by seed) and their statistics over seeds."""
    degradation_runs = tuple(run_degradation(r) for r in runs)  # per run, for the plot and r
    return Configuration(
        runs=runs,
        label=label,
        name=name or label,
        encoding=runs[0].encoding,
        variant=runs[0].variant,
        stats=frozen_map((key, stats([r.value(key) for r in runs])) for key in numeric_columns()),
        by_source_length=bucket_stats(runs),
        teacher_forced=teacher_forced_stats(runs),
        degradation_runs=degradation_runs,
        degradation=degradation_stats(degradation_runs),
    )


def bucket_stats(runs: Sequence[RunRecord]) -> tuple[BucketStats, ...]:
    """Test sacreBLEU per source-length bucket over a group's runs (none if no run has buckets)."""
    with_buckets = [r.by_source_length for r in runs if r.by_source_length]
    if not with_buckets:
        return ()
    out = []
    for b in with_buckets[0]:
        s = stats([next((x.sacrebleu for x in bs if x.bucket == b.bucket), None) for bs in with_buckets])
        out.append(BucketStats(b.bucket, b.num_sentences, s))
    return tuple(out)


def teacher_forced_stats(runs: Sequence[RunRecord]) -> Optional[TeacherForcedStats]:
    """A group's pooled teacher-forced figures over its runs (None if no run has them); the training
    length where the runs agree on it."""
    tf = [r.teacher_forced for r in runs if r.teacher_forced]
    if not tf:
        return None
    positions = sorted({(b.start, b.bucket) for t in tf for b in t.by_position})
    lengths = {t.training_length for t in tf}
    ks = sorted({k for t in tf for k in t.boundary_p_eos}, key=int)
    return TeacherForcedStats(
        runs=len(tf),
        training_length=lengths.pop() if len(lengths) == 1 else None,
        nll_beyond=stats([t.nll_beyond for t in tf]),
        by_position=tuple(
            PositionNll(label, lo, stats([next((b.nll for b in t.by_position if b.start == lo), None) for t in tf]))
            for lo, label in positions
        ),
        boundary_p_eos=frozen_map((k, stats([t.boundary_p_eos.get(k) for t in tf])) for k in ks),
    )


def pick_baseline(groups: Sequence[Configuration], wanted: Optional[str]) -> Configuration:
    """The group named `wanted` (label, then encoding); default: the sinusoidal group, else the first."""
    if wanted:
        for field in ("label", "encoding"):
            match = [g for g in groups if getattr(g, field) == wanted]
            if len(match) > 1:  # an encoding several share (length/sinusoidal, length/sinusoidal_concat)
                match = [g for g in match if PurePosixPath(g.name).name == wanted] or match
            if len(match) > 1:  # still several: which one is the user's call, not the first one's
                raise CompareError(
                    f"--baseline {wanted!r} matches {len(match)} configurations "
                    f"({', '.join(g.label for g in match)}); give one of these labels"
                )
            if match:
                return match[0]
        raise CompareError(
            f"--baseline {wanted!r} matches no configuration; choose a label "
            f"({', '.join(g.label for g in groups)}) or an encoding "
            f"({', '.join(sorted({g.encoding for g in groups}))})"
        )
    return next((g for g in groups if g.encoding == "sinusoidal"), groups[0])


def mark_baseline(groups: Sequence[Configuration], baseline: Configuration) -> list[Configuration]:
    """The groups with `baseline` marked (labels are unique)."""
    return [replace(g, is_baseline=g.label == baseline.label) for g in groups]


def baseline_of(groups: Sequence[Configuration]) -> Configuration:
    return next(g for g in groups if g.is_baseline)


def _differing(references: Iterable[tuple[str, Optional[list[str]]]]) -> Optional[tuple[str, str]]:
    """(first, other): the first run whose references (None: not written) differ from the first's."""
    first = None
    for run, lines in references:
        if first is None and lines is not None:
            first = (run, lines)
        elif lines is not None and lines != first[1]:
            return first[0], run
    return None


def check_same_references(groups: Sequence[Configuration]) -> None:
    """Runs scored on different test sets cannot be compared: CompareError naming two of them."""
    folders = dict.fromkeys(str(test_folder(r)) for g in groups for r in g.runs)
    differ = _differing([(folder, output_lines(Path(folder) / run_files.REFERENCES)) for folder in folders])
    if differ:
        raise CompareError(
            f"test references differ between {differ[0]} and {differ[1]}: runs scored on different "
            f"test sets cannot be compared (pass --no_significance to tabulate them anyway)"
        )


def add_seed_wins(groups: Sequence[Configuration], baseline: Configuration, margin: float = 0.0) -> list[Configuration]:
    """Each group with its test sacreBLEU's `seeds_above` (`seed_wins`) against the baseline."""
    return [
        g
        if g.label == baseline.label
        else replace(g, seeds_above=seed_wins(g.runs, baseline.runs, lambda r: r.value(HEADLINE), margin))
        for g in groups
    ]


def concat_ks(groups: Sequence[Configuration]) -> list[int]:
    return sorted({k for g in groups for r in g.runs for k in r.concat})


def check_same_inputs(groups: Sequence[Configuration]) -> None:
    """Runs averaged or compared at one k must have been scored on the same k-inputs (the same
    test set, the same joining order): otherwise raise ValueError naming two runs that differ."""
    for k in concat_ks(groups):
        runs = [r for g in groups for r in g.runs if k in r.concat]
        differ = _differing((r.run, read_lines(test_folder(r) / f"concat/k{k}" / run_files.REFERENCES)) for r in runs)
        if differ:
            raise ValueError(
                f"the k={k} references differ between {differ[0]} and {differ[1]}: runs scored on "
                f"different joined inputs (another test set or evaluation.concat_seed) cannot be "
                f"compared (pass --no_significance to tabulate them anyway)"
            )


def add_concat_stats(
    groups: Sequence[Configuration], baseline: Configuration, check_inputs: bool = True, margin: float = 0.0
) -> list[Configuration]:
    """Each group with its `concat` = {k: ConcatStats} for every k some run scored."""
    if check_inputs:
        check_same_inputs(groups)
    ks = concat_ks(groups)

    def at(g: Configuration, k: int) -> ConcatStats:
        scored = [r.concat[k] for r in g.runs if k in r.concat]
        bleu, ratio = stats([x.sacrebleu for x in scored]), stats([x.length_ratio for x in scored])
        bleu_at = lambda r: r.concat[k].sacrebleu if k in r.concat else None
        wins = None if g.label == baseline.label else seed_wins(g.runs, baseline.runs, bleu_at, margin)
        return ConcatStats(bleu, ratio, seeds_above=wins)

    return [replace(g, concat=frozen_map((k, at(g, k)) for k in ks)) if ks else g for g in groups]
