"""The study's terms as values, each spelled here once: the measures (`Measure`, on utils/metrics.Metric),
the findings tables (`Table`), what a row's reading says (`Outcome`), why a verdict is withheld
(`Withheld`) and which row a finding is (`RowKey`, whose label is made only for the pages). A StrEnum's
value is the text the findings JSON, the pages and the family file spell, so a record holds the member
and writes the same bytes, and a family file's `table: test` matches `Table.TEST`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import ClassVar, Optional, Union

from utils.metrics import HEADLINE, METRICS, Metric, bucket_label

_BLEU = next(m for m in METRICS if m.name == HEADLINE)  # a study compares in the headline metric
_NLL = Metric("nll_no_eos", "NLL", 3, -1)  # teacher-forced NLL per token, EOS renormalised out (nats)


class Measure(StrEnum):
    """A measure of the findings tables, named as shown; the family's numbers per measure (tie_margin,
    effect, equivalence: study/read/family.py) are keyed by it. Its Metric gives digits and direction."""

    metric: Metric
    unit: str  # a difference's unit on the pages

    def __new__(cls, metric: Metric, unit: str) -> Measure:
        member = str.__new__(cls, metric.label)
        member._value_ = metric.label
        member.metric, member.unit = metric, unit
        return member

    SACREBLEU = (_BLEU, "BLEU")
    NLL = (_NLL, "nats")

    @property
    def digits(self) -> int:
        return self.metric.digits

    @property
    def lower_is_better(self) -> bool:
        return self.metric.direction < 0


class Table(StrEnum):
    """A findings table (study/judge/findings.py builds them, a family file's headline entries name them)."""

    DEGRADATION = "degradation"  # a pair's NLL joined minus alone
    TEST = "test"  # the test set
    CONCAT = "concat"  # inputs of k test pairs joined
    BUCKETS = "buckets"  # the test set by source length
    TEACHER_FORCED = "teacher_forced"  # the NLL beyond the training length

    @property
    def measure(self) -> Measure:
        return Measure.NLL if self in (Table.DEGRADATION, Table.TEACHER_FORCED) else Measure.SACREBLEU


class Outcome(StrEnum):
    """What a rule lets a row say (study/judge/wording.py: `outcome`; study/judge/design.py: `look_outcome`)."""

    DIRECTION = "direction"  # the rule's direction test
    DEPENDS = "depends on the test set"  # opposite directions on two declared sets (study/stats/across_sets.py)
    EQUIVALENT = "equivalent"  # shown equivalent within the margin
    BOTH = "both"  # a small real difference inside the margin
    INCONCLUSIVE = "inconclusive"  # neither, with an equivalence margin (or a sequential plan's last look)
    WITHHELD = "withheld"  # declared, but not worded yet (interim, not from the declaring commit, ...)
    DESCRIPTIVE = "descriptive"  # not declared, or no test
    NOT_TESTED = "not tested"  # no difference to test

    @property
    def worded(self) -> bool:
        return self in (Outcome.DIRECTION, Outcome.DEPENDS, Outcome.EQUIVALENT, Outcome.BOTH, Outcome.INCONCLUSIVE)


class Withholding(Enum):
    """Why a declared row's verdict is withheld (study/judge/verdicts.py decides, wording.py words it)."""

    INTERIM = "interim"  # the study lacks planned seeds
    NOT_FROM_DECLARING_COMMIT = "not from the declaring commit"  # some run of it was trained before the family
    NOT_TESTED_AT_DECLARING_COMMIT = "not tested at the declaring commit"  # some test records another commit
    MISSING_SET = "a declared test set lacks some of its seeds"  # an across claim without every set's test


@dataclass(frozen=True)
class Withheld:
    """A withheld verdict's reason and, for an interim study, the planned seeds the row holds of those planned."""

    why: Withholding
    held: int = 0
    planned: int = 0
    sets: tuple[str, ...] = ()  # MISSING_SET: the declared sets without a test of every seed


@dataclass(frozen=True)
class WholeTestSet:
    """A whole test set: the configurations' own split, or (`name`) a file pair the family declares."""

    name: str = ""
    at_k: ClassVar[int] = 1  # the k of joined test pairs a selection speaks for (None: pooled over k)

    @property
    def label(self) -> str:
        return f"test set {self.name}" if self.name else "test set"


@dataclass(frozen=True)
class Joined:
    """The inputs of k joined test pairs."""

    k: int

    @property
    def label(self) -> str:
        return f"k={self.k}"

    @property
    def at_k(self) -> int:
        return self.k


@dataclass(frozen=True)
class LengthBucket:
    """A source-length bucket of the test set (as scores.json names it)."""

    bucket: str
    at_k: ClassVar[int] = 1

    @property
    def label(self) -> str:
        return f"{self.bucket} tokens"


class SpanKind(Enum):
    """Which (pair, k) cells a degradation selection pools (study/read/degradation.py), its words."""

    ALL_K = "all k"
    BEYOND_JOINED = "beyond joined training (k > {k})"
    AT_K = "k={k}"
    START_WITHIN = "start within training"
    START_BEYOND = "start beyond training"
    START_BUCKET = "start {bucket}"


@dataclass(frozen=True)
class Span:
    """A degradation selection: its kind, the k it names (AT_K: its own; BEYOND_JOINED: the most
    pairs training joined) and, by start position (START_BUCKET), the positions [lo, hi)."""

    kind: SpanKind
    k: int = 0
    start: tuple[int, Optional[int]] = (0, None)

    @property
    def column(self) -> str:
        """Its name in the degradation table and the summary JSON."""
        return self.kind.value.format(k=self.k, bucket=bucket_label(*self.start))

    @property
    def label(self) -> str:
        return f"degradation, {self.column}"

    @property
    def at_k(self) -> Optional[int]:
        """The k it speaks for: its own, one beyond the joined range, or None (pooled over k)."""
        return {SpanKind.AT_K: self.k, SpanKind.BEYOND_JOINED: self.k + 1}.get(self.kind)


ALL_K = Span(SpanKind.ALL_K)


@dataclass(frozen=True)
class NllBeyond:
    label: ClassVar[str] = "teacher-forced NLL beyond training, all k"
    at_k: ClassVar[int] = 1  # (no joined range is named: the NLL beyond training is the encoding's own)


def joined_range(joined_k: int, k: Optional[int]) -> Optional[str]:
    """Where k joined test pairs (None: pooled over every k) sit against a joined-pair training range."""
    if joined_k <= 1 or k == 1:
        return None
    if k is None:
        return f"pools k inside and beyond the joined training range (k <= {joined_k})"
    if k <= joined_k:
        return f"inside the joined training range (k <= {joined_k}): not extrapolation"
    return f"beyond the joined training range (k > {joined_k})"


Selection = Union[WholeTestSet, Joined, LengthBucket, Span, NllBeyond]  # what a row is compared on


@dataclass(frozen=True)
class RowKey:
    """Which findings row: every join of rows is by key; its label is made from it for the pages only."""

    table: Table
    config: str
    on: Selection

    @property
    def label(self) -> str:
        return self.on.label
