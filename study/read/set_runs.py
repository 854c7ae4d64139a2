"""A study's runs as tested on each file pair its family declares (issue 78; `test_sets:`, study/read/
test_sets.py): each run's <run>/test_set_<name>/ read as a record of its own, grouped by configuration
like the runs' own test split, with the outputs its rows compare. A run without that test is listed
(a declared comparison holding it gets no verdict); a test of other bytes than the declared files is
refused in one line, never compared."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from study.read.run_groups import check_same_references, group_runs, mark_baseline
from study.read.run_outputs import StudyOutputs, in_bucket, read_outputs
from study.read.run_records import CompareError, read_scores, summarise_run
from study.read.run_stats import stats, test_folder
from study.read.test_sets import TestSet, held_sides, other_sides
from study.records import Configuration, RunRecord, Stats
from study.stats.significance import bleu_from_stats
from utils import run_files
from utils.stored_files import stored_exists


@dataclass(frozen=True)
class SetStudy:
    """One declared file pair: the configurations as tested on it, their baseline (None: the baseline has no
    test on it), the outputs its rows compare, and each run with no test on it ("<label> seed N")."""

    test_set: TestSet
    groups: tuple[Configuration, ...]
    baseline: Optional[Configuration]
    outputs: StudyOutputs
    missing: tuple[str, ...] = ()

    def compared_bleu(self, group: Configuration) -> tuple[Stats, int, int]:
        """(test sacreBLEU over `group`'s runs on the sources its rows compare: those of at most the set's
        `max_source_tokens` subword tokens, else all, test.py's own figure; how many sentences those are, of
        how many).
        Only the runs whose outputs the findings read count (a seed the baseline lacks, a stale test: none)."""
        limit, scores, chosen, total = self.test_set.max_source_tokens, [], 0, 0
        for run in group.runs:
            if str(test_folder(run)) not in self.outputs.runs or self.outputs.get(run, 1) is None:
                continue
            sentences, references = self.outputs.get(run, 1)
            keep = np.ones(len(references), dtype=bool)
            if limit is not None:  # the rows' selection (study/judge/findings.py: OnSet)
                lengths = self.outputs.lengths(run)
                if lengths is None or len(lengths) != len(references):
                    continue  # (no source lengths: no selection to score)
                keep = in_bucket(lengths, (0, limit))
            scores.append(float(bleu_from_stats(sentences[keep].sum(axis=0), float32=False)))
            chosen, total = int(keep.sum()), len(references)
        return stats(scores), chosen, total


def read_sets(
    groups: Sequence[Configuration], baseline: Configuration, sets: Sequence[TestSet]
) -> tuple[SetStudy, ...]:
    """Each declared file pair's side of the study whose configurations (read on their own split) are `groups`."""
    return tuple(_read_set(groups, baseline, s) for s in sets if not s.own)


def _read_set(groups: Sequence[Configuration], baseline: Configuration, test_set: TestSet) -> SetStudy:
    rows, missing = [], []
    for g in groups:
        for run in (r for r in g.runs if not r.variant):
            record = _on_set(run, test_set)
            if record is None:
                missing.append(f"{g.label} seed {run.seed}")
            else:
                rows.append(record)
    on_set = group_runs(rows) if rows else []
    base = next((g for g in on_set if g.label == baseline.label), None)
    if base is None:
        return SetStudy(test_set, tuple(on_set), None, StudyOutputs(), tuple(missing))
    on_set = mark_baseline(on_set, base)
    check_same_references(on_set)
    base = next(g for g in on_set if g.is_baseline)
    return SetStudy(test_set, tuple(on_set), base, read_outputs(on_set, base), tuple(missing))


def _on_set(run: RunRecord, test_set: TestSet) -> Optional[RunRecord]:
    """The run as tested on `test_set` (None: no such test); a test of other files is refused."""
    run_dir = Path(run.run)
    if not stored_exists(run_dir / test_set.folder / run_files.SCORES):
        return None
    held = read_scores(run_dir, test_set.folder).get("test_set")
    declared = (test_set.sha256.src, test_set.sha256.ref)
    if held_sides(held) != declared:
        other = other_sides(held, declared, (test_set.src, test_set.ref))
        raise CompareError(
            f"{run_dir / test_set.folder} is a test of other files than the declared test set {test_set.name!r} "
            f"({other}): move that folder away and test the run on the declared files (sweep.py --family), "
            f"or leave the run out"
        )
    return summarise_run(run_dir, run.config, (test_set.folder, {}))
