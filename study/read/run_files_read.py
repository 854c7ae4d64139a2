"""A run's JSON files as typed values (a metrics.jsonl line, what the study reads of a scores.json),
each a frozen dataclass filled from the JSON object by its field names (`from_json`). A key an older
run's file lacks takes the field's default, so every run folder read before still reads."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Optional, Sequence, TypeVar

from study.records import JsonObject
from utils.metrics import HEADLINE

T = TypeVar("T")


def from_json(cls: type[T], obj: Optional[JsonObject]) -> T:
    """`cls` (a dataclass) from a JSON object by its fields' names (metadata `key` where the JSON's key
    is no Python name: "from"); a key the object lacks (or no object) takes the field's default."""
    obj = obj if isinstance(obj, dict) else {}
    given = {}
    for f in fields(cls):
        key = f.metadata.get("key", f.name)
        if key in obj:
            given[f.name] = obj[key]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise KeyError(key)  # (a required key: as the dict read it was)
    return cls(**given)


@dataclass(frozen=True)
class LogLine:
    """A metrics.jsonl record (utils/run_log.py); None: the line lacks the key."""

    event: str
    time: Optional[float] = None
    step: Optional[int] = None
    tokens_per_sec: Optional[float] = None
    train_seconds: Optional[float] = None
    final_train_loss: Optional[float] = None
    params: Optional[float] = None
    valid_loss: Optional[float] = None
    valid_accuracy: Optional[float] = None


def log_lines(records: Sequence[JsonObject]) -> list[LogLine]:
    return [from_json(LogLine, r) for r in records]


@dataclass(frozen=True)
class ConcatScore:  # one k of scores.json's `concat` list
    k: int
    sacrebleu: Optional[float] = None  # (utils/metrics.HEADLINE)
    length_ratio: Optional[float] = None


@dataclass(frozen=True)
class ForcedBucket:  # a target-position bucket of one k of scores.json's `teacher_forced` report
    start: int = field(metadata={"key": "from"})
    bucket: str


@dataclass(frozen=True)
class ForcedAtK:
    """One k of the teacher-forced report (its parts as written: pooled by utils.metrics.pool_nll)."""

    buckets: tuple[JsonObject, ...] = ()
    beyond_training: Optional[JsonObject] = None
    boundary: Optional[JsonObject] = None  # None: no boundary at that k

    def boundary_p_eos(self) -> Optional[float]:
        return from_json(Boundary, self.boundary).p_eos if self.boundary else None


@dataclass(frozen=True)
class Boundary:
    p_eos: Optional[float] = None


@dataclass(frozen=True)
class TrainingLength:
    target: Optional[int] = None


@dataclass(frozen=True)
class ForcedReport:
    """scores.json's `teacher_forced` report (evaluation/teacher_forced.py), per k (keys as written: "2")."""

    k: Optional[JsonObject] = None  # None or empty: no k was scored (then no report)
    training_length: Optional[JsonObject] = None
    position_buckets: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class ScoresFile:
    """What the study reads of a <test>/scores.json beyond its metrics; None: tested before the part
    was written (its row's cells stay empty)."""

    decoding: Any = None
    longer_than_training: Optional[JsonObject] = None
    by_source_length: Optional[tuple[JsonObject, ...]] = None
    concat: Optional[tuple[JsonObject, ...]] = None
    teacher_forced: Optional[JsonObject] = None
    test_time_overrides: Optional[JsonObject] = None
    split: Optional[str] = None
    tested_at: Optional[JsonObject] = None

    def longer_bleu(self) -> Optional[float]:
        return (self.longer_than_training or {}).get(HEADLINE)

    def concat_scores(self) -> list[ConcatScore]:
        return [from_json(ConcatScore, c) for c in self.concat or ()]
