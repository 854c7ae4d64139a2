"""What the findings compare of a run's test folder, each file read once, before anything is tested."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from study.read.degradation import PairSums, read_pair_sums
from study.read.run_stats import retest_hint, test_folder
from study.records import Configuration, RunRecord, frozen_map
from study.stats.significance import sentence_stats
from utils import run_files
from utils.stored_files import StoredFileError, read_lines

SentenceStats = tuple[np.ndarray, list[str]]  # per-sentence BLEU statistics of the outputs, their references
NllBeyond = Mapping[tuple[int, int], tuple[float, float]]  # {(k, input): (NLL sum, tokens)} beyond training


@dataclass(frozen=True)
class RunOutputs:
    """One run's test outputs: per k (1: the test set) its sentence statistics, its per-pair sums, its
    per-input teacher-forced NLL beyond training and each source's length (None: not written)."""

    sentences: Mapping[int, Optional[SentenceStats]]
    pairs: Optional[PairSums]
    beyond: Optional[NllBeyond]
    lengths: Optional[list[int]]


@dataclass(frozen=True)
class StudyOutputs:
    """The outputs of every run the findings pair with the baseline's, by test folder."""

    runs: Mapping[str, RunOutputs] = field(default_factory=lambda: frozen_map({}))

    def of(self, run: RunRecord) -> RunOutputs:
        return self.runs[str(test_folder(run))]  # (a run that was not read: a KeyError, never a silent None)

    def get(self, run: RunRecord, k: int) -> Optional[SentenceStats]:
        return self.of(run).sentences[k]

    def pairs(self, run: RunRecord) -> Optional[PairSums]:
        return self.of(run).pairs

    def beyond(self, run: RunRecord) -> Optional[NllBeyond]:
        return self.of(run).beyond

    def lengths(self, run: RunRecord) -> Optional[list[int]]:
        return self.of(run).lengths


Bucket = tuple[int, Optional[int]]  # a source-length bucket's shortest and longest sentence (None: no limit)


def in_bucket(lengths: Sequence[int], bucket: Bucket) -> np.ndarray:
    """Which sentences' sources (their subword lengths, as test.py counted them) fall in `bucket`."""
    lo, hi = bucket
    return np.array([n >= lo and (hi is None or n <= hi) for n in lengths], dtype=bool)


def read_outputs(groups: Sequence[Configuration], baseline: Configuration) -> StudyOutputs:
    """The outputs of every run the findings may pair: the baseline's with a seed and a current test,
    the others' with a current test and a seed the baseline has (none without another configuration);
    each at every k some run scored, its source lengths where the baseline's test split by them."""
    base = [r for r in baseline.runs if r.seed is not None and not r.stale_test]
    others = [r for g in groups if g.label != baseline.label for r in g.runs]
    mine = [r for r in others if r.seed in {b.seed for b in base} and not r.stale_test]
    ks = sorted({1} | {k for g in groups for r in g.runs for k in r.concat})
    with_lengths = any(r.by_source_length for r in baseline.runs)
    read: dict[str, RunOutputs] = {}
    for run in [*base, *mine] if others else []:
        if str(test_folder(run)) not in read:
            lengths = source_lengths(run) if with_lengths else None
            sentences = frozen_map((k, _sentences(run, k)) for k in ks)
            read[str(test_folder(run))] = RunOutputs(sentences, read_pair_sums(run), nll_beyond(run), lengths)
    return StudyOutputs(frozen_map(read))


def _sentences(run: RunRecord, k: int) -> Optional[SentenceStats]:
    hyps, refs = paired_lines(test_folder(run) / ("" if k == 1 else f"concat/k{k}"))
    return None if hyps is None or refs is None else (sentence_stats(hyps, refs), refs)


def paired_lines(folder) -> tuple[Optional[list[str]], Optional[list[str]]]:
    """A test folder's hypotheses and references (None where not written), one line per pair each."""
    files = [folder / run_files.HYPOTHESES, folder / run_files.REFERENCES]
    hyps, refs = map(output_lines, files)
    if hyps is not None and refs is not None and len(hyps) != len(refs):
        raise ValueError(
            f"{files[0]} has {len(hyps)} lines but {files[1]} has {len(refs)} (one per test pair, "
            f"written together by test.py): a file was cut or edited; {retest_hint(folder)}"
        )
    return hyps, refs


def output_lines(path) -> Optional[list[str]]:
    """The lines of a test output file in any stored form (None when not written); a damaged plain one
    is named with the command that writes it again."""
    try:
        return read_lines(path)
    except StoredFileError as e:
        if e.where != Path(path):
            raise
        raise ValueError(f"{path} {e.problem}; {retest_hint(path)}") from None


def source_lengths(run: RunRecord) -> Optional[list[int]]:
    path = test_folder(run) / run_files.SOURCE_LENGTHS
    lines = output_lines(path)
    try:
        return None if lines is None else [int(x) for x in lines]
    except ValueError:
        raise ValueError(
            f"{path} is damaged (one length in subword tokens per line expected); {retest_hint(path)}"
        ) from None


def nll_beyond(run: RunRecord) -> Optional[NllBeyond]:
    """A run's run_files.TEACHER_FORCED_BEYOND, or None when it was not written."""
    path = test_folder(run) / run_files.TEACHER_FORCED_BEYOND
    lines = output_lines(path)
    if lines is None or len(lines) < 2:  # not written, or no token beyond (no training length recorded)
        return None
    found = {}
    for number, line in enumerate(lines[1:], 2):
        try:
            k, i, n, x = line.split("\t")
            found[int(k), int(i)] = (float(x), float(n))
        except ValueError:
            raise ValueError(
                f"{path} line {number} is damaged (k, input, tokens, NLL sum per line expected); "
                f"{retest_hint(test_folder(run))}"
            ) from None
        if not (math.isfinite(float(x)) and float(x) >= 0 and float(n) >= 0):
            raise ValueError(
                f"{path} line {number}: an NLL sum must be finite and not negative, got {x.strip()} over {n} "
                f"tokens; {retest_hint(test_folder(run))}"
            )
    return found


def training_length(run: RunRecord) -> Optional[int]:
    """The decoder training length a run's teacher-forced figures were split at (None: unknown)."""
    return run.teacher_forced.training_length if run.teacher_forced else None
