"""The study as typed records (issue 68): what passes between its stages, each frozen.

read (study/run_records.py: a `RunRecord` per run folder and tested variant) -> group
(study/run_groups.py: a `Configuration` per configuration, its runs and their statistics over
seeds; the baseline's comparisons added as new copies, `dataclasses.replace`) -> test
(study/findings.py) -> word (study/verdicts.py) -> render (the pages read the records;
study/serialize.py writes the JSON and CSV files from them). No stage writes into a record it was
given: every field is set when the record is made. Mappings inside a record are read-only views
(`frozen_map`), sequences are tuples. `JsonObject` marks what is still raw JSON as a file holds it
(a metrics.jsonl line, scores.json), read once into a record. (The findings' rows and the family
rule's readings are still dicts: tests/study/test_records.py lists those modules.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional

from settings.config import ExperimentConfig

JsonObject = Mapping[str, Any]  # a parsed JSON object as a run's file holds it, before it is a record


def frozen_map(items: Mapping | Iterable[tuple]) -> Mapping:
    """A read-only mapping (in the given order): a record's mapping cannot be written through either."""
    return MappingProxyType(dict(items))


def _empty() -> Mapping:
    return frozen_map({})


@dataclass(frozen=True)
class Stats:
    """Mean and sample std (None under two values) of the values present, and their count."""

    mean: Optional[float]
    std: Optional[float]
    n: int = 0


@dataclass(frozen=True)
class Provenance:
    """What made a run (utils/provenance.run_provenance): its sessions' distinct values, sorted."""

    device_kind: tuple[str, ...] = ("unknown",)
    device: tuple[str, ...] = ("unknown",)
    precision: tuple[str, ...] = ("unknown",)
    code: tuple[str, ...] = ("unknown",)
    dates: tuple[str, ...] = ()
    inferred: tuple[str, ...] = ()

    def values(self, what: str) -> tuple[str, ...]:
        """One of the fields by name (device_kind, device, precision, code)."""
        return getattr(self, what)


@dataclass(frozen=True)
class SourceBucket:
    """A source-length bucket of a run's test set, as scores.json scored it."""

    bucket: str
    num_sentences: int
    sacrebleu: Optional[float]
    min_len: Optional[int] = None
    max_len: Optional[int] = None


@dataclass(frozen=True)
class KScore:
    """A run's scores on the inputs of k joined test pairs."""

    sacrebleu: Optional[float]
    length_ratio: Optional[float]


@dataclass(frozen=True)
class PositionNll:
    """Teacher-forced NLL of a target-position bucket starting at `start` (one run's, or a Stats)."""

    bucket: str
    start: int
    nll: Any  # a run's pooled NLL (Optional[float]), or a configuration's Stats over its runs


@dataclass(frozen=True)
class RunTeacherForced:
    """A run's teacher-forced diagnostic pooled over k (study/run_records.run_teacher_forced)."""

    training_length: Optional[int]
    position_buckets: tuple[int, ...]
    nll_beyond: Optional[float]
    by_position: tuple[PositionNll, ...]
    boundary_p_eos: Mapping[str, float]  # k (as scores.json spells it) -> p(EOS)


@dataclass(frozen=True)
class ValidPoint:
    """A validation record of metrics.jsonl as the curves plot reads it."""

    step: Optional[int] = None
    valid_loss: Optional[float] = None  # (None: not computed at that step)


@dataclass(frozen=True)
class RunRecord:
    """One run folder (or one test-time variant of it): what compare.py reads of it, once."""

    run: str
    seed: Optional[int] = None
    test_dir: Optional[str] = None
    name: str = ""
    variant: bool = False
    config: ExperimentConfig = field(default_factory=ExperimentConfig)
    group_key: str = ""  # its configuration (study/run_records.experiment_settings), as sorted JSON
    encoding: str = ""
    train_loss: Optional[float] = None
    valid_loss: Optional[float] = None
    valid_accuracy: Optional[float] = None
    params: Optional[float] = None
    train_minutes: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    steps: Optional[int] = None
    valid_curve: tuple[ValidPoint, ...] = ()
    provenance: Provenance = field(default_factory=Provenance)
    scores: Mapping[str, Any] = field(
        default_factory=_empty
    )  # every registered metric (utils/metrics.py) and its `about` text
    longer_bleu: Optional[float] = None
    by_source_length: tuple[SourceBucket, ...] = ()
    concat: Mapping[int, KScore] = field(default_factory=_empty)
    teacher_forced: Optional[RunTeacherForced] = None

    def value(self, column: str) -> Any:
        """A numeric column of the main table (study/summary_tables.numeric_columns) or a score."""
        return self.scores.get(column) if column in self.scores else getattr(self, column, None)


@dataclass(frozen=True)
class BucketStats:
    """Test sacreBLEU over a configuration's runs in one source-length bucket."""

    bucket: str
    num_sentences: int
    mean: Optional[float]
    std: Optional[float]


@dataclass(frozen=True)
class ConcatStats:
    """A configuration at one k of joined inputs: sacreBLEU and length ratio over its seeds, and
    against the baseline (p_value from the findings, None until they exist and for the baseline)."""

    bleu: Optional[float]
    bleu_std: Optional[float]
    ratio: Optional[float]
    ratio_std: Optional[float]
    n: int
    p_value: Optional[float] = None
    seeds_above: Optional[tuple[int, int]] = None


@dataclass(frozen=True)
class TeacherForcedStats:
    """A configuration's pooled teacher-forced figures over the runs that have them (`runs`)."""

    runs: int
    training_length: Optional[int]
    nll_beyond: Stats
    by_position: tuple[PositionNll, ...]  # nll: Stats
    boundary_p_eos: Mapping[str, Stats]


@dataclass(frozen=True)
class Configuration:
    """The runs of one configuration (its seeds) and their statistics; the fields after `stats`
    are set by the stages that compare it with the baseline, each on a new copy."""

    runs: tuple[RunRecord, ...]
    label: str
    encoding: str = ""
    variant: bool = False
    stats: Mapping[str, Stats] = field(default_factory=_empty)  # numeric column -> over the runs
    by_source_length: Optional[tuple[BucketStats, ...]] = None
    teacher_forced: Optional[TeacherForcedStats] = None
    degradation_runs: tuple[Optional[Mapping[str, float]], ...] = ()  # per run (study/degradation.py)
    degradation: Optional[Mapping[str, Stats]] = None
    is_baseline: bool = False
    seeds_above: Optional[tuple[int, int]] = None
    p_value: Optional[float] = None
    concat: Mapping[int, ConcatStats] = field(default_factory=_empty)

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def seeds(self) -> tuple:
        return tuple(r.seed for r in self.runs)

    def mean(self, column: str) -> Optional[float]:
        return self.stats[column].mean if column in self.stats else None

    def std(self, column: str) -> Optional[float]:
        return self.stats[column].std if column in self.stats else None
