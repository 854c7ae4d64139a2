"""What the findings read from a run's test folder (never one half published), each file once:
per-sentence BLEU statistics of its outputs with their references (the test set and each k), its
teacher-forced NLL beyond training per input (BEYOND_FILE) and its per-pair sums (PAIRS_FILE), and
each source's length."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from evaluation.teacher_forced import BEYOND_FILE
from study.read.degradation import PairSums, read_pair_sums
from study.read.run_stats import retest_hint, test_folder
from study.records import RunRecord
from study.stats.significance import sentence_stats
from utils import run_files
from utils.stored_files import StoredFileError, read_lines


class Outputs:
    """Per-sentence BLEU statistics of a run's test outputs (read once), with their references, its
    per-input teacher-forced NLL beyond training and its per-pair sums (read once)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int], Optional[tuple[np.ndarray, list[str]]]] = {}
        self._beyond: dict[str, Optional[Mapping[tuple[int, int], tuple[float, float]]]] = {}
        self._pairs: dict[str, Optional[PairSums]] = {}

    def beyond(self, run: RunRecord) -> Optional[Mapping[tuple[int, int], tuple[float, float]]]:
        key = str(test_folder(run))
        if key not in self._beyond:
            self._beyond[key] = nll_beyond(run)
        return self._beyond[key]

    def pairs(self, run: RunRecord) -> Optional[PairSums]:
        key = str(test_folder(run))
        if key not in self._pairs:
            self._pairs[key] = read_pair_sums(run)
        return self._pairs[key]

    def get(self, run: RunRecord, k: int) -> Optional[tuple[np.ndarray, list[str]]]:
        """(stats, references) of the test set (k = 1) or of its k-inputs; None when not written."""
        key = (str(test_folder(run)), k)
        if key not in self._cache:
            folder = test_folder(run) / ("" if k == 1 else f"concat/k{k}")
            hyps, refs = paired_lines(folder)
            self._cache[key] = None if hyps is None or refs is None else (sentence_stats(hyps, refs), refs)
        return self._cache[key]


def paired_lines(folder) -> tuple[Optional[list[str]], Optional[list[str]]]:
    """A test folder's hypotheses and references (None where not written), one line per pair each:
    a file cut short, grown or not UTF-8 is named (test.py writes exactly one line per pair)."""
    files = [folder / run_files.HYPOTHESES, folder / run_files.REFERENCES]
    hyps, refs = map(output_lines, files)
    if hyps is not None and refs is not None and len(hyps) != len(refs):
        raise ValueError(
            f"{files[0]} has {len(hyps)} lines but {files[1]} has {len(refs)} (one per test pair, "
            f"written together by test.py): a file was cut or edited; {retest_hint(folder)}"
        )
    return hyps, refs


def output_lines(path) -> Optional[list[str]]:
    """The lines of a test output file in any stored form (None when not written); a damaged one
    (not UTF-8, a cut xz stream) is named in one line (utils/stored_files.py); a plain one, as test.py
    wrote it, with the command that writes it again."""
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


def nll_beyond(run: RunRecord) -> Optional[Mapping[tuple[int, int], tuple[float, float]]]:
    """A run's teacher-forced NLL beyond its training length per input: {(k, input): (NLL sum,
    tokens)} (test.py's BEYOND_FILE), or None when it was not written."""
    lines = output_lines(test_folder(run) / BEYOND_FILE)
    if lines is None or len(lines) < 2:  # not written, or no token beyond (no training length recorded)
        return None
    found = {}
    for number, line in enumerate(lines[1:], 2):
        try:
            k, i, n, x = line.split("\t")
            found[int(k), int(i)] = (float(x), float(n))
        except ValueError:
            raise ValueError(
                f"{test_folder(run) / BEYOND_FILE} line {number} is damaged (k, input, tokens, NLL sum per line "
                f"expected); {retest_hint(test_folder(run))}"
            ) from None
        if not (math.isfinite(float(x)) and float(x) >= 0 and float(n) >= 0):
            raise ValueError(
                f"{test_folder(run) / BEYOND_FILE} line {number}: an NLL sum must be finite and not negative, "
                f"got {x.strip()} over {n} tokens; {retest_hint(test_folder(run))}"
            )
    return found


def training_length(run: RunRecord) -> Optional[int]:
    """The decoder training length a run's teacher-forced figures were split at (None: unknown)."""
    return run.teacher_forced.training_length if run.teacher_forced else None
