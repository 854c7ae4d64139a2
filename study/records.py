"""The study as typed records (issue 68), each frozen: a stage returns new ones, never writing into those it
was given; mappings are read-only views (`frozen_map`), sequences tuples. Still raw JSON (`JsonObject`): a
run's file before it is a record, and what tools/ and study/simulate/ read back from a findings JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional

from settings.config import ExperimentConfig
from study.stats.seed_test import ALPHA, MIN_SENTENCES, SeedTest
from study.terms import Measure, Outcome, RowKey, Span, Table, WholeTestSet, Withheld, joined_range

JsonObject = Mapping[str, Any]  # a parsed JSON object as a run's file holds it, before it is a record


def frozen_map(items: Mapping | Iterable[tuple] = ()) -> Mapping:
    """A read-only mapping (in the given order): a record's mapping cannot be written through either."""
    return MappingProxyType(dict(items))


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
    resumed: tuple[Optional[int], ...] = ()  # the step each resumed training session started at
    inferred: tuple[str, ...] = ()

    def values(self, what: str) -> tuple[str, ...]:
        return getattr(self, what)


@dataclass(frozen=True)
class CodeState:
    """The code a test was scored with (scores.json's `tested_at`: utils/provenance.code_state)."""

    commit: Optional[str] = None
    uncommitted_changes: Optional[bool] = None


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
    sacrebleu: Optional[float]  # None (either): the entry lacks it, as an older or damaged file may
    length_ratio: Optional[float]


@dataclass(frozen=True)
class PositionNll:
    bucket: str  # of target positions, from `start`
    start: int
    nll: Any  # its teacher-forced NLL: a run's pooled (Optional[float]), or a configuration's Stats over its runs


@dataclass(frozen=True)
class RunTeacherForced:
    """A run's teacher-forced diagnostic pooled over k."""

    training_length: Optional[int]  # None: the report names no decoder training length
    position_buckets: tuple[int, ...]
    nll_beyond: Optional[float]  # None: no target token at or beyond the training length
    by_position: tuple[PositionNll, ...]
    boundary_p_eos: Mapping[str, float]  # k (as scores.json spells it) -> p(EOS)


@dataclass(frozen=True)
class ValidPoint:
    step: int
    valid_loss: float


@dataclass(frozen=True)
class RunRecord:
    """One run folder (or one test-time variant of it): what compare.py reads of it, once."""

    run: str
    seed: int = 0  # its config's (settings/schema.py: always an int)
    test_dir: str = ""  # the folder its test scores are in ("": the run's test/)
    name: str = ""
    variant: bool = False
    config: ExperimentConfig = field(default_factory=ExperimentConfig)
    group_key: str = ""  # its configuration (study/read/run_records.experiment_settings), as sorted JSON
    encoding: str = ""
    # the training figures, each None where metrics.jsonl lacks it (a run stopped early, an older train.py)
    train_loss: Optional[float] = None
    valid_loss: Optional[float] = None
    valid_accuracy: Optional[float] = None
    params: Optional[float] = None
    train_minutes: Optional[float] = None
    tokens_per_sec: Optional[float] = None
    steps: Optional[int] = None
    valid_curve: tuple[ValidPoint, ...] = ()
    provenance: Provenance = field(default_factory=Provenance)
    # every registered metric (utils/metrics.py): its value, and its `about` text
    scores: Mapping[str, Optional[float | str]] = field(default_factory=frozen_map)
    longer_bleu: Optional[float] = None  # None: not scored on pairs longer than training
    by_source_length: tuple[SourceBucket, ...] = ()
    concat: Mapping[int, KScore] = field(default_factory=frozen_map)  # on the inputs of k joined test pairs
    teacher_forced: Optional[RunTeacherForced] = None  # None: tested without the diagnostic
    stale_test: str = ""  # why its test scored a checkpoint no longer its best (artifacts/tested_run.py)
    tested_at: Optional[CodeState] = None  # None: tested before test.py recorded it

    def value(self, column: str) -> Any:
        """A numeric column of the main table (study/read/run_stats.numeric_columns) or a score."""
        return self.scores.get(column) if column in self.scores else getattr(self, column, None)


@dataclass(frozen=True)
class BucketStats:
    bucket: str
    num_sentences: int
    bleu: Stats  # test sacreBLEU over the runs


@dataclass(frozen=True)
class ConcatStats:
    """A configuration at one k of joined inputs over its seeds, and against the baseline (None: the baseline)."""

    bleu: Stats
    ratio: Stats
    p_value: Optional[float] = None  # (None: also until the findings exist)
    seeds_above: Optional[tuple[int, int]] = None  # (None: also where no scored seed is shared)

    @property
    def n(self) -> int:
        return self.bleu.n


@dataclass(frozen=True)
class TeacherForcedStats:
    runs: int  # the runs with the diagnostic, pooled
    training_length: Optional[int]  # None: no run names its decoder training length
    nll_beyond: Stats
    by_position: tuple[PositionNll, ...]  # nll: Stats
    boundary_p_eos: Mapping[str, Stats]


@dataclass(frozen=True)
class Configuration:
    """The runs of one configuration (its seeds) and their statistics, then how it compares with the baseline."""

    runs: tuple[RunRecord, ...]
    label: str  # as the pages name it (told apart from another of the same name)
    encoding: str = ""
    variant: bool = False
    stats: Mapping[str, Stats] = field(default_factory=frozen_map)  # numeric column -> over the runs
    by_source_length: tuple[BucketStats, ...] = ()  # (): no run has source-length buckets
    teacher_forced: Optional[TeacherForcedStats] = None  # None: no run has the diagnostic
    # per run (study/read/degradation.py): each span's degradation and its NLL alone (degradation.ALONE)
    degradation_runs: tuple[Optional[Mapping[Span | str, float]], ...] = ()
    degradation: Mapping[Span, Stats] = field(default_factory=frozen_map)  # empty: no run has the pair sums
    is_baseline: bool = False
    seeds_above: Optional[tuple[int, int]] = None
    p_value: Optional[float] = None
    concat: Mapping[int, ConcatStats] = field(default_factory=frozen_map)
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
    seed: Any
    difference: float
    p_value: float  # its own paired bootstrap p (sacreBLEU's, descriptive: it holds the trained models fixed)


@dataclass(frozen=True)
class RuleP:
    """One rule's decision p and equivalence p of a findings row, each also Holm-adjusted over the family."""

    rule: str
    p_rule: Optional[float] = None
    p_holm: Optional[float] = None
    p_equivalence: Optional[float] = None
    p_equivalence_holm: Optional[float] = None

    def worded(self, outcome: Outcome, finding: str, withheld: Optional[Withheld] = None) -> Reading:
        return Reading(**vars(self), outcome=outcome, finding=finding, withheld=withheld)


@dataclass(frozen=True)
class Reading(RuleP):
    outcome: Outcome = field(kw_only=True)
    finding: str = field(kw_only=True)
    withheld: Optional[Withheld] = None  # why its verdict is withheld (None: it is not, or a look is still open)


@dataclass(frozen=True)
class RowPower:
    """A tested row's planning figures by the current rule (equivalence: a declared row with a margin)."""

    detectable: float
    seeds_needed: Optional[int]
    equivalence_power: Optional[float] = None
    seeds_for_equivalence: Optional[int] = None


@dataclass(frozen=True)
class LookReading:
    """A sequential family's declared row at the look whose seeds it holds (1-based; 0: before the first):
    decided there or not, each test's boundary there (on the p scale; None: not tested there), and the
    repeated 95% interval (Jennison & Turnbull), whose coverage holds whichever look the study stops at."""

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
    repeated: Optional[tuple[float, float]] = None  # the repeated 95% interval (None: before the first look)


@dataclass(frozen=True)
class SetReading:
    """A declared comparison on one of the test sets its claim spans: the set's row's mean difference, the
    rule's decision p and the TOST p there (1: no equivalence margin), unadjusted; `tested` False: that
    set lacks a tested row of the comparison's seeds (its verdict is withheld)."""

    name: str
    mean: float = 0.0
    p: float = 1.0
    equivalence_p: float = 1.0
    tested: bool = True
    own: bool = False  # the configurations' own split (the declared row's own key), else a file pair
    # a sequential plan's look: the set's repeated 95% interval there, at its comparison's level (): fixed)
    repeated: tuple[float, ...] = ()

    def key(self, row: RowKey) -> RowKey:
        """The key of the comparison `row`'s row on this set."""
        return row if self.own else RowKey(row.table, row.config, WholeTestSet(self.name))


@dataclass(frozen=True)
class RowTest:
    mean_difference: float  # the joint bootstrap's
    seed_test: SeedTest


@dataclass(frozen=True)
class ComparisonRow:
    """A configuration against the baseline on one measure over the seeds both ran, before it is judged."""

    key: RowKey
    seeds: tuple = ()
    num_sentences: int = 0
    per_seed: tuple[SeedDifference, ...] = ()
    tested: Optional[RowTest] = None  # None: too few units to test (`untested`)
    lower_is_better: bool = False
    encoding: str = ""
    unit: Optional[str] = None  # the NLL beyond training's resampled unit (pair or input)
    joined_k: int = 1  # the most test pairs its runs' training joined (1: none; study/read/run_stats)
    from_declaring_commit: bool = True  # every run of it trained from a commit that declared the family
    tested_at_declaring_commit: bool = True  # and no run of it tested (as recorded) at a commit that did not
    declared: bool = False
    look: Optional[LookReading] = None
    sets: tuple[SetReading, ...] = ()  # a claim across test sets: its reading on each (study/judge/across.py)
    # a set's row of such a claim read at a sequential look: its repeated 95% interval there (the claim's level)
    repeated: tuple[float, ...] = ()

    @property
    def config(self) -> str:
        return self.key.config

    @property
    def compared_on(self) -> str:
        return self.key.label

    @property
    def joined_range(self) -> Optional[str]:
        return joined_range(self.joined_k, self.key.on.at_k)

    @property
    def untested(self) -> Optional[str]:
        """Why it was not tested (None: it was): too few units carry it."""
        return None if self.tested else f"not tested (fewer than {MIN_SENTENCES} units carry it)"

    @property
    def mean_difference(self) -> Optional[float]:
        return self.tested.mean_difference if self.tested else None

    @property
    def seed_test(self) -> Optional[SeedTest]:
        return self.tested.seed_test if self.tested else None

    @property
    def p_value(self) -> Optional[float]:
        """The seed-level test's p against no difference (None: not tested, or one seed)."""
        return self.tested.seed_test.p_value if self.tested else None

    @property
    def differences(self) -> tuple[float, ...]:
        return tuple(s.difference for s in self.per_seed)

    def judged(self, reading: Reading, exploratory: Optional[Reading] = None) -> JudgedRow:
        return JudgedRow(**vars(self), reading=reading, exploratory=exploratory)


@dataclass(frozen=True)
class JudgedRow(ComparisonRow):
    """A row read by the family's rule (`reading`) and, beside an older rule, the current one's (`exploratory`)."""

    reading: Reading = field(kw_only=True)
    exploratory: Optional[Reading] = None
    power: Optional[RowPower] = None  # the wording's, for a row with a seed-level SE

    @property
    def finding(self) -> str:
        return self.reading.finding

    @property
    def outcome(self) -> Outcome:
        return self.reading.outcome

    @property
    def p_holm(self) -> Optional[float]:
        return self.reading.p_holm


@dataclass(frozen=True)
class FindingsTable:
    name: Table
    title: str
    metric: Measure
    rows: tuple[ComparisonRow, ...]
    family_rows: int = 0  # (no row is declared before the wording)
    alpha: float = ALPHA  # Holm's first step, the α of its detectable effects (before the wording: ALPHA)


@dataclass(frozen=True)
class RuleText:
    name: str
    text: str  # its one-sentence summary


@dataclass(frozen=True)
class Interim:
    """A study still missing planned seeds: the fewest planned seeds a declared comparison holds, of the plan's."""

    seeds: int
    planned: int


@dataclass(frozen=True)
class LookInterim(Interim):
    look: int  # a sequential plan's next look (1-based), whose seeds are `planned`


@dataclass(frozen=True)
class LookPlan:
    """Where a sequential family stands: its looks (seeds per configuration), the looks every declared
    comparison's seeds reached, the looks taken (the study stops at the first where every comparison is
    decided, or at the last), and the planned seeds archived beyond a stop (not counted)."""

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
    """The findings report: the method's settings beside the tables, in <prefix>_findings.json's order."""

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

    def row(self, key: RowKey) -> Optional[ComparisonRow]:
        return next((r for t in self.tables for r in t.rows if r.key == key), None)


@dataclass(frozen=True)
class SequentialFindings(Findings):
    sequential: LookPlan  # its plan and where it stands
