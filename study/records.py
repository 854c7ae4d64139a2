"""The study as typed records (issue 68): what passes between its stages, each frozen.

read (study/read/run_records.py: a `RunRecord` per run folder and tested variant) -> group
(study/read/run_groups.py: a `Configuration` per configuration, its runs and their statistics over
seeds; the baseline's comparisons added as new copies, `dataclasses.replace`) -> test
(study/judge/findings.py) -> word (study/judge/verdicts.py) -> render (the pages read the records;
study/pages/serialize.py writes the JSON and CSV files from them). No stage writes into a record it was
given: every field is set when the record is made. Mappings inside a record are read-only views
(`frozen_map`), sequences are tuples. `JsonObject` marks what is still raw JSON as a file holds it
(a metrics.jsonl line, scores.json), read once into a record. The findings are records too: a
`ComparisonRow` per configuration and measure (its `SeedDifference`s and study/seed_test.SeedTest),
in a `FindingsTable` per measure, in the `Findings` report; the wording (study/judge/verdicts.py) gives
each row a `Reading` per rule and its `RowPower` on a new copy. A row is known by its `RowKey` (table,
configuration, `Selection`), never by its label, and a withheld verdict keeps its reason (`Withheld`).
study/pages/serialize.py writes them all.
Still raw JSON: what tools/ and study/simulate/calibration.py read back from an archived findings JSON
(the family file is a typed model of its own: study/read/family.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional

from settings.config import ExperimentConfig
from study.stats.seed_test import SeedTest
from study.terms import Measure, Outcome, RowKey, Span, Table, Withheld

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
    sacrebleu: Optional[float]  # None: no sentence of the bucket scored
    min_len: Optional[int] = None  # min_len, max_len None: scored before test.py wrote the edges
    max_len: Optional[int] = None


@dataclass(frozen=True)
class KScore:
    """A run's scores on the inputs of k joined test pairs."""

    sacrebleu: Optional[float]  # None (either): the entry lacks it, as an older or damaged file may
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

    training_length: Optional[int]  # None: the report names no decoder training length
    position_buckets: tuple[int, ...]
    nll_beyond: Optional[float]  # None: no target token at or beyond the training length
    by_position: tuple[PositionNll, ...]
    boundary_p_eos: Mapping[str, float]  # k (as scores.json spells it) -> p(EOS)


@dataclass(frozen=True)
class ValidPoint:
    """A validation record of metrics.jsonl as the curves plot reads it."""

    step: Optional[int] = None  # None: the line names no step
    valid_loss: Optional[float] = None  # (None: not computed at that step)


@dataclass(frozen=True)
class RunRecord:
    """One run folder (or one test-time variant of it): what compare.py reads of it, once."""

    run: str
    seed: Optional[int] = None
    test_dir: str = ""  # the folder its test scores are in ("": the run's test/)
    name: str = ""
    variant: bool = False
    config: ExperimentConfig = field(default_factory=ExperimentConfig)
    group_key: str = ""  # its configuration (study/run_records.experiment_settings), as sorted JSON
    encoding: str = ""
    # the training figures, each None where metrics.jsonl lacks it (no end record, no validation, no
    # train speed: a run stopped early or logged by an older train.py); the table shows "–"
    train_loss: Optional[float] = None
    valid_loss: Optional[float] = None
    valid_accuracy: Optional[float] = None
    params: Optional[float] = None
    train_minutes: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    steps: Optional[int] = None
    valid_curve: tuple[ValidPoint, ...] = ()
    provenance: Provenance = field(default_factory=Provenance)
    scores: Mapping[str, Optional[float | str]] = field(
        default_factory=_empty
    )  # every registered metric (utils/metrics.py): its value, and its `about` text
    longer_bleu: Optional[float] = None  # None: not scored on pairs longer than training
    by_source_length: tuple[SourceBucket, ...] = ()
    concat: Mapping[int, KScore] = field(default_factory=_empty)
    teacher_forced: Optional[RunTeacherForced] = None  # None: tested without the diagnostic
    stale_test: str = ""  # why its test scored a checkpoint no longer its best (artifacts/tested_run.py)

    def value(self, column: str) -> Any:
        """A numeric column of the main table (study/read/run_stats.numeric_columns) or a score."""
        return self.scores.get(column) if column in self.scores else getattr(self, column, None)


@dataclass(frozen=True)
class BucketStats:
    """Test sacreBLEU over a configuration's runs in one source-length bucket."""

    bucket: str
    num_sentences: int
    bleu: Stats


@dataclass(frozen=True)
class ConcatStats:
    """A configuration at one k of joined inputs: sacreBLEU and length ratio over its seeds (n: of
    sacreBLEU's), and against the baseline (p_value from the findings, None until they exist and for
    the baseline; seeds_above None for the baseline and where no scored seed is shared)."""

    bleu: Stats
    ratio: Stats
    p_value: Optional[float] = None
    seeds_above: Optional[tuple[int, int]] = None

    @property
    def n(self) -> int:
        return self.bleu.n


@dataclass(frozen=True)
class TeacherForcedStats:
    """A configuration's pooled teacher-forced figures over the runs that have them (`runs`)."""

    runs: int
    training_length: Optional[int]  # None: no run names its decoder training length
    nll_beyond: Stats
    by_position: tuple[PositionNll, ...]  # nll: Stats
    boundary_p_eos: Mapping[str, Stats]


@dataclass(frozen=True)
class Configuration:
    """The runs of one configuration (its seeds) and their statistics; the fields after `stats`
    are set by the stages that compare it with the baseline, each on a new copy."""

    runs: tuple[RunRecord, ...]
    label: str  # as the pages name it (told apart from another of the same name)
    encoding: str = ""
    variant: bool = False
    stats: Mapping[str, Stats] = field(default_factory=_empty)  # numeric column -> over the runs
    by_source_length: tuple[BucketStats, ...] = ()  # (): no run has source-length buckets
    teacher_forced: Optional[TeacherForcedStats] = None  # None: no run has the diagnostic
    # per run (study/read/degradation.py): each span's degradation and its NLL alone (degradation.ALONE)
    degradation_runs: tuple[Optional[Mapping[Span | str, float]], ...] = ()
    degradation: Mapping[Span, Stats] = field(default_factory=_empty)  # empty: no run has the pair sums
    is_baseline: bool = False
    seeds_above: Optional[tuple[int, int]] = None
    p_value: Optional[float] = None
    concat: Mapping[int, ConcatStats] = field(default_factory=_empty)
    name: str = ""  # its runs' name without their seeds (study/read/run_records.config_label): configs/<name>.yaml

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


@dataclass(frozen=True)
class SeedDifference:
    """One seed's difference from the baseline's run of that seed, and its own paired bootstrap p
    (sacreBLEU's, descriptive: it holds the trained models fixed)."""

    seed: Any
    difference: float
    p_value: float  # (significance.BootstrapResult's, always computed)


@dataclass(frozen=True)
class Reading:
    """One rule's verdict of a findings row (study/judge/verdicts.py): its decision p and equivalence p,
    each Holm-adjusted over the declared family, what the rule lets the row say and its words."""

    rule: str
    p_rule: Optional[float] = None
    p_holm: Optional[float] = None
    p_equivalence: Optional[float] = None
    p_equivalence_holm: Optional[float] = None
    outcome: Optional[Outcome] = None
    finding: Optional[str] = None
    withheld: Optional[Withheld] = None  # why its verdict is withheld (None: it is not, or a look is still open)


@dataclass(frozen=True)
class RowPower:
    """A tested row's planning figures by the current rule (study/verdicts.row_power); the
    equivalence figures only for a declared row with a margin."""

    detectable: float
    seeds_needed: Optional[int]
    equivalence_power: Optional[float] = None
    seeds_for_equivalence: Optional[int] = None


@dataclass(frozen=True)
class LookReading:
    """A declared row of a sequential family (study/judge/sequential_findings.py): the look whose seeds the
    row holds (1-based; 0: before the first look) of the plan's `looks`, whether it was decided there,
    the level each test had to pass at that look (its boundary, on the p scale; None: not tested
    there), and the repeated 95% interval at that look (Jennison & Turnbull), whose coverage holds
    whichever look the study stops at."""

    look: int
    looks: int
    seeds: int
    decided: bool
    last: bool  # the plan's last look
    direction: int = 0  # decided: +1 / -1 (the mean difference's sign), 0 none
    equivalent: bool = False
    next_seeds: Optional[int] = None  # the next look's seeds (an open row)
    boundary: Optional[float] = None
    boundary_equivalence: Optional[float] = None
    repeated_low: Optional[float] = None
    repeated_high: Optional[float] = None


@dataclass(frozen=True)
class ComparisonRow:
    """A row of a findings table: a configuration against the baseline on one measure (study/judge/findings.py),
    over the seeds both ran; `reading` (the family's rule), `exploratory` (the current rule's, beside an
    older rule's), `declared` and `power` are set by the wording (study/judge/verdicts.py) on new copies."""

    key: RowKey
    seeds: tuple = ()
    num_sentences: int = 0
    mean_difference: Optional[float] = None
    per_seed: tuple[SeedDifference, ...] = ()
    seed_test: Optional[SeedTest] = None
    lower_is_better: bool = False
    encoding: str = ""
    untested: Optional[str] = None  # why a row with too few units was not tested (its finding until worded)
    unit: Optional[str] = None  # the NLL beyond training's resampled unit (pair or input)
    joined_range: Optional[str] = None
    from_declaring_commit: bool = True
    declared: bool = False
    reading: Optional[Reading] = None
    exploratory: Optional[Reading] = None
    power: Optional[RowPower] = None
    look: Optional[LookReading] = (
        None  # a sequential family's declared row: its look (study/judge/sequential_findings.py)
    )

    @property
    def config(self) -> str:
        return self.key.config

    @property
    def compared_on(self) -> str:
        """Its label, for the pages and the findings JSON."""
        return self.key.label

    @property
    def p_value(self) -> Optional[float]:
        """The seed-level test's p against no difference (None: not tested, or one seed)."""
        return self.seed_test.p_value if self.seed_test is not None else None

    @property
    def differences(self) -> tuple[float, ...]:
        return tuple(s.difference for s in self.per_seed)

    @property
    def finding(self) -> Optional[str]:
        return self.reading.finding if self.reading is not None else self.untested

    @property
    def outcome(self) -> Optional[Outcome]:
        return self.reading.outcome if self.reading is not None else None

    @property
    def p_holm(self) -> Optional[float]:
        return self.reading.p_holm if self.reading is not None else None


@dataclass(frozen=True)
class FindingsTable:
    """One findings table (a measure); `family_rows` (its declared rows) and `alpha` (Holm's first
    step, the α of its detectable effects) set by the wording."""

    name: Table
    title: str
    metric: Measure
    rows: tuple[ComparisonRow, ...]
    family_rows: Optional[int] = None
    alpha: Optional[float] = None


@dataclass(frozen=True)
class RuleText:
    """A decision rule's name and its one-sentence summary, for the pages."""

    name: str
    text: str


@dataclass(frozen=True)
class Interim:
    """A study still missing planned seeds: the fewest planned seeds a declared comparison holds, of
    the plan's (or, a sequential plan, of its next look's: `look`, 1-based)."""

    seeds: int
    planned: int
    look: Optional[int] = None


@dataclass(frozen=True)
class LookPlan:
    """Where a sequential family stands (study/judge/sequential_findings.py): its looks (seeds per
    configuration) and spending, the looks every declared comparison's seeds reached, the looks the
    decisions read (the study stops at the first where every comparison is decided, or at the last),
    and the planned seeds archived beyond a stop (not counted)."""

    looks: tuple[int, ...]
    spending: str
    spending_equivalence: str
    reached: int
    taken: int
    stopped: bool
    held: int = 0  # going on: the fewest of the next look's seeds a declared comparison holds
    not_counted: tuple = ()


@dataclass(frozen=True)
class Findings:
    """The findings report (study/findings.findings_report): the method's settings beside the
    tables, in the order <prefix>_findings.json lists them (study/serialize.findings_json)."""

    baseline: str
    metric: Measure
    alpha: float
    test: str
    correction: str
    family: Optional[str]
    decision_rule: RuleText
    exploratory_rule: Optional[RuleText]
    family_size: int
    family_unmatched: tuple[str, ...]
    tie_margin: Mapping[str, float]
    equivalence_margin: Mapping[str, float]
    equivalence_test: str
    planned_seeds: Optional[tuple[int, ...]]
    planned_device: Optional[str]
    planned_precision: Optional[str]
    interim: Optional[Interim]
    descriptive_p: str
    n_samples: int
    bootstrap_seed: int
    rule: str
    tables: tuple[FindingsTable, ...]
    sequential: Optional[LookPlan] = None  # a sequential family's plan and where it stands

    def row(self, key: RowKey) -> Optional[ComparisonRow]:
        """The row of `key` (None: no such row)."""
        return next((r for t in self.tables for r in t.rows if r.key == key), None)
