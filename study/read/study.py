"""A whole study read in one call (`read_study`): nothing after it (study/judge/, study/simulate/,
study/pages/) opens a file, reads a stored output or runs git: they are given the `Study`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from study.read.declared import declaring_runs, tests_off_declaring_commit
from study.read.family import NO_FAMILY, Family, load_family
from study.read.run_groups import (
    add_concat_stats,
    add_seed_wins,
    baseline_of,
    check_same_references,
    group_runs,
    mark_baseline,
    pick_baseline,
)
from study.read.run_outputs import StudyOutputs, read_outputs
from study.read.run_records import CompareError, read_runs
from study.read.seed_provenance import check_mixed
from study.read.set_runs import SetStudy, read_sets
from study.records import Configuration


@dataclass(frozen=True)
class Study:
    """A study as read: its family, its configurations (the baseline marked), the baseline, the outputs
    its findings compare (none without significance tests), the run folders trained from a commit
    that declared the family (None: no family file, nothing to prove) and the test folders whose
    recorded test commit did not declare it."""

    family: Family
    groups: tuple[Configuration, ...]
    baseline: Configuration
    outputs: StudyOutputs
    proven: Optional[frozenset[str]]
    tested_off: frozenset[str] = frozenset()
    sets: tuple[SetStudy, ...] = ()  # each declared file pair's side of it (study/read/set_runs.py)


def read_study(
    runs: Sequence[str],
    family: Optional[str] = None,
    baseline: Optional[str] = None,
    mixed: Sequence[str] = (),
    significance: bool = True,
) -> Study:
    """The study of the run folders `runs` (paths or glob patterns) under the family file `family`: with
    `significance`, also what its findings compare. A damaged file, references that differ: a CompareError."""
    declared = load_family(family)
    margin = declared.tie_margin.sacreBLEU
    try:
        groups = group_runs(read_runs(runs))  # a damaged test output, or per-pair sums: one line naming it
        check_mixed(groups, list(mixed))
        base = pick_baseline(groups, baseline or baseline_present(groups, declared.baseline, family))
        if baseline and declared.baseline and pick_baseline(groups, declared.baseline) is not base:
            raise CompareError(
                f"--baseline {baseline} contradicts the family's declared baseline {declared.baseline} ({family}): "
                f"drop --baseline, or compare without --family"
            )
        groups = mark_baseline(groups, base)  # each stage returns new records (study/records.py)
        groups = add_seed_wins(groups, base, margin)
        groups = add_concat_stats(groups, base, check_inputs=significance, margin=margin)
        if not significance:
            return Study(declared, tuple(groups), baseline_of(groups), StudyOutputs(), None)
        check_same_references(groups)
        return read_compared(groups, baseline_of(groups), declared, read_sets(groups, base, declared.test_sets or ()))
    except ValueError as e:  # references that differ between runs, a damaged per-run file
        raise CompareError(str(e)) from None


def read_compared(
    groups: Sequence[Configuration], baseline: Configuration, family: Family = NO_FAMILY, sets: Sequence[SetStudy] = ()
) -> Study:
    """The study of configurations already read, with what its findings compare against `baseline`."""
    proven = declaring_runs(groups, family.path)
    tested_off = tests_off_declaring_commit([*groups, *(g for s in sets for g in s.groups)], family.path)
    return Study(family, tuple(groups), baseline, read_outputs(groups, baseline), proven, tested_off, tuple(sets))


def baseline_present(groups: Sequence[Configuration], declared: Optional[str], family: Optional[str]) -> Optional[str]:
    """The family's declared baseline, or None (the default) while it has no run yet (the study interim)."""
    if declared is None:
        return None
    try:
        pick_baseline(groups, declared)
    except CompareError:
        print(
            f"note: {family} declares the baseline {declared}, which has no run among these yet: the tables "
            f"compare with {pick_baseline(groups, None).label} and word no finding (interim)",
            file=sys.stderr,
        )
        return None
    return declared
