"""A study's declared family (configs/<study>/findings/headline.yaml): the comparisons that may be
worded, the rule that words them (study/stats/rules.py) and the study's plan, as a frozen pydantic
model (as settings/ holds a config; configs/family.schema.json is generated from it). The file is read
by the configs' strict YAML reader; what one key's type cannot say is checked once, in
`Family._rules`; every error is one line naming the file and key, before the runner trains a run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Mapping, Optional, Sequence

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from settings.errors import _raw as written
from settings.schema import MAX_SEED
from study.read.test_sets import TestSet, check_names, file_changes
from study.read.test_sets import refusal as test_set_refusal
from study.records import FindingsTable, frozen_map
from study.stats.rules import CURRENT, RULES, UNNAMED
from study.stats.seed_test import ALPHA
from study.stats.sequential import SPENDING
from study.stats.sequential_family import Plan, Spending
from study.terms import Joined, LengthBucket, NllBeyond, RowKey, Selection, Span, SpanKind, Table, WholeTestSet
from utils.metrics import bucket_label

TABLES = tuple(t.value for t in Table)  # study/judge/findings.py's tables, as a family file names them
DEVICES = ("cpu", "cuda", "mps")
PRECISIONS = ("fp32", "bf16", "fp16")
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# strict (no "5" for 5, no true for 1), no unknown key, no nan or inf; frozen: a family is read once
FROZEN = ConfigDict(frozen=True, strict=True, extra="forbid", allow_inf_nan=False)
# a YAML list, held as a tuple (a strict tuple takes no other sequence: a YAML set is refused)
Listed = BeforeValidator(lambda value: tuple(value) if isinstance(value, list) else value)
Label = Annotated[str, Field(min_length=1)]
NonNegative = Annotated[float, Field(ge=0)]
Positive = Annotated[float, Field(gt=0)]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]  # train.py's bounds on `seed` (settings/schema.py)
Distinct = Field(min_length=1, json_schema_extra={"uniqueItems": True})


class Measures(BaseModel):
    """A number per measure of the findings tables, keyed by the unit the tables spell."""

    model_config = FROZEN
    BOUND: ClassVar[str] = ">= 0"  # as the error says it

    def given(self) -> Mapping[str, float]:
        """{unit: number} of the measures that have one, in the tables' order."""
        return frozen_map((unit, value) for unit, value in self if value is not None)

    def of(self, metric: str) -> Optional[float]:
        return self.given().get(metric)


class TieMargin(Measures):
    """The smallest mean difference worth a direction: a seed closer to the baseline than this is a tie."""

    sacreBLEU: NonNegative = 0.1
    NLL: NonNegative = 0.01


class Effect(Measures):
    """The difference whose seeds-needed each table reports."""

    sacreBLEU: NonNegative = 1.0
    NLL: NonNegative = 0.05


class Equivalence(Measures):
    """m of "equivalent within ±m" (two one-sided seed-level tests); a measure left out has none."""

    BOUND: ClassVar[str] = "> 0"
    # (None when left out; written null is no margin, and refused)
    sacreBLEU: Positive = None  # type: ignore[assignment]
    NLL: Positive = None  # type: ignore[assignment]


UNITS = tuple(TieMargin.model_fields)  # the metrics the tables are in


def selection_of(compared_on: str) -> Optional[Selection]:
    """The selection whose row label a family file spells (None: no row's, a typo that
    study/judge/verdicts.check_entries refuses against the rows): of the selections the numbers in it
    could make, the one whose label reads back exactly as written ("k=04" names no row)."""
    numbers = [int(n) for n in re.findall(r"\d+", compared_on)]
    ks = numbers[:1] or [0]
    starts = [(numbers[0], numbers[1] + 1 if len(numbers) > 1 else None)] if numbers else []
    candidates = [
        WholeTestSet(),
        NllBeyond(),
        *(Joined(k) for k in ks),
        *(LengthBucket(bucket_label(*start)) for start in starts),
        *(Span(kind, k) for kind in SpanKind for k in ks),
        *(Span(SpanKind.START_BUCKET, start=start) for start in starts),
    ]
    return next((on for on in candidates if on.label == compared_on), None)


class HeadlineEntry(BaseModel):
    """One declared comparison: the rows of `table` compared on `compared_on` (left out: every row of
    the table), of the configurations `configs` (left out: every configuration compared)."""

    model_config = FROZEN
    table: Literal[TABLES]
    compared_on: Label = None  # type: ignore[assignment]  (None when left out; null is no row label, and refused)
    configs: Optional[Annotated[tuple[Label, ...], Listed]] = None
    # with declared test_sets: a direction or equivalence claimed across every set (on each, as an
    # intersection-union test) or per set
    claim: Literal["across", "per_set"] = "across"
    _on: Optional[Selection] = PrivateAttr(None)  # the selection `compared_on` names, read with the file

    @model_validator(mode="after")
    def _selection(self) -> HeadlineEntry:
        self._on = None if self.compared_on is None else selection_of(self.compared_on)
        return self

    def names(self, key: RowKey) -> bool:
        """Whether the entry names the row of `key` whatever its configuration: its table and selection."""
        return self.table == key.table and (self.compared_on is None or self._on == key.on)

    def matches(self, key: RowKey) -> bool:
        return self.names(key) and (self.configs is None or key.config in self.configs)

    def as_written(self) -> str:
        return str(self.model_dump(mode="json", exclude_unset=True))


class Family(BaseModel):
    """A study's headline comparisons, declared before its runs, and its plan."""

    model_config = ConfigDict(**FROZEN, title="A study's declared family (configs/<study>/findings/headline.yaml)")
    baseline: Optional[Label] = None  # an encoding, or a configuration's label (configs/<label>.yaml)
    headline: Annotated[tuple[HeadlineEntry, ...], Field(min_length=1), Listed]
    # the decision rule the family was declared under (a file naming none: study/rules.UNNAMED)
    rule: Literal[tuple(RULES)] = UNNAMED.name
    tie_margin: TieMargin = TieMargin()
    effect: Effect = Effect()
    # each measure's equivalence margin m ("equivalent within ±m" is a finding of its own)
    equivalence: Equivalence = Equivalence()
    # the plan, declared with the comparisons: every seed each configuration runs with (until all exist
    # the pages are interim and word no verdict), in the order a sequential plan's looks take them
    seeds: Optional[Annotated[tuple[Seed, ...], Distinct, Listed]] = None
    # a sequential plan (study/stats/sequential_family.py): the seeds per configuration at each look, the
    # first n_k of `seeds` (None: one look, at every planned seed), and how each family of tests
    # spends its alpha over the looks
    looks: Optional[Annotated[tuple[Annotated[int, Field(ge=2)], ...], Distinct, Listed]] = None
    spending: Spending = "obrien-fleming"
    spending_equivalence: Spending = "obrien-fleming"
    # the test sets the claims are about (study/read/test_sets.py; None: the configurations' own split)
    test_sets: Optional[Annotated[tuple[TestSet, ...], Field(min_length=1), Listed]] = None
    # the device kind and precision of every run
    device: Optional[Literal[DEVICES]] = None
    precision: Optional[Literal[PRECISIONS]] = None
    _path: Optional[str] = PrivateAttr(None)  # the file it was read from (None: no family declared)

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Family:
        """What one key's type cannot say: the seeds distinct; a sequential plan's looks increasing, the
        last every planned seed, under the current rule; and, read from a file (`info.context`: the
        configs folder), each configuration and the baseline existing."""
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise _refused(refusal("seeds", value=list(self.seeds)))
        if self.looks is None:
            given = [key for key in ("spending", "spending_equivalence") if key in self.model_fields_set]
            if given:
                raise _refused(f"{given[0]} is a sequential plan's: give looks too (e.g. looks: [8, 12, 16, 20])")
        else:
            if any(b <= a for a, b in zip(self.looks, self.looks[1:])):
                raise _refused(refusal("looks", value=list(self.looks)))
            if self.seeds is None or len(self.seeds) != self.looks[-1]:
                planned = "no seeds" if self.seeds is None else f"{len(self.seeds)} seeds"
                last = f"the last look ({self.looks[-1]}) is every planned seed"
                raise _refused(f"{last}, but the family plans {planned}")
            if RULES[self.rule].veto:  # (the older beyond_tie reads the plans declared under it)
                raise _refused(
                    f"a sequential plan (looks) is read under the rule {CURRENT.name}: add rule: {CURRENT.name}"
                )
        claimed = next((i for i, h in enumerate(self.headline) if "claim" in h.model_fields_set), None)
        if claimed is not None and self.test_sets is None:
            raise _refused(f"headline[{claimed}].claim is about the declared test sets: give test_sets too")
        across = next(
            (i for i, h in enumerate(self.headline) if h.claim == "across" and "claim" in h.model_fields_set), None
        )
        if across is not None and len(self.test_sets or ()) < 2:
            raise _refused(
                f"headline[{across}].claim: across needs two or more test_sets to span (the family declares one): "
                f"declare another, or leave claim out"
            )
        why = check_names(self.test_sets) if self.test_sets else None
        if why:
            raise _refused(why)
        if info.context is not None:
            self._exist(info.context)
        return self

    def _exist(self, configs: Path) -> None:
        """Each named configuration exists, and the baseline is one or an encoding: a name that is
        neither would match no run, ever (the study interim under a note, not failing where written)."""
        from models.positional_options import ENCODING_OPTIONS
        from settings.errors import suggest

        for i, h in enumerate(self.headline):
            for c in h.configs or ():
                if not (configs / f"{c}.yaml").is_file():
                    raise _refused(f"headline[{i}].configs names {c}, but configs/{c}.yaml does not exist")
        changed = file_changes(self.test_sets or (), configs.parent)
        if changed:
            raise _refused(changed)
        encodings = sorted(ENCODING_OPTIONS)
        if self.baseline is not None and self.baseline not in encodings:
            if not (configs / f"{self.baseline}.yaml").is_file():
                raise _refused(
                    f"baseline {self.baseline!r} is neither an encoding ({', '.join(encodings)}) nor a configuration "
                    f"(configs/{self.baseline}.yaml does not exist).{suggest(self.baseline, encodings)}"
                )

    @property
    def path(self) -> Optional[str]:
        return self._path

    @property
    def plan(self) -> Optional[Plan]:
        """The sequential plan, or None for a fixed-seed family (one look once every seed is in)."""
        if self.looks is None:
            return None
        exact = RULES[self.rule].both_tails  # its looks' levels spent on the t scale, or z carried by level
        return Plan(self.looks, self.spending, self.spending_equivalence, ALPHA, ALPHA, exact)

    def at(self, path: str) -> Family:
        family = self.model_copy()
        family._path = path
        return family

    def declares(self, key: RowKey) -> bool:
        return any(h.matches(key) for h in self.headline)

    def across(self, key: RowKey) -> tuple[TestSet, ...]:
        """The test sets a declared row's claim spans (its entry's `claim: across`, with a file pair
        declared); () for a claim about its own rows alone."""
        sets = self.test_sets or ()
        claimed = any(h.matches(key) and h.claim == "across" for h in self.headline)
        return sets if claimed and any(not s.own for s in sets) else ()


NO_FAMILY = Family.model_construct(headline=(), rule=CURRENT.name)  # no family declared: every row descriptive


def missing_rows(
    tables: Sequence[FindingsTable], family: Family, configs: Optional[list[str]] = None
) -> list[tuple[str, str]]:
    """(table, config) of every declared comparison with no row: an entry naming its `compared_on`, for
    each configuration it names (naming none: each compared configuration, `configs`). They count in
    Holm's family as p = 1 and keep a planned study interim."""
    have = [r.key for t in tables for r in t.rows]
    out = []
    for h in family.headline:
        if h.compared_on is None:
            continue
        for config in h.configs or configs or []:  # (no list given: only the configs an entry names)
            if not any(h.names(key) and key.config == config for key in have):
                out.append((h.table, config))
    return out


# what a key must be, as the one line refusing it says ({value}: the value as written)
NOT_A_FAMILY = "expected a mapping with a non-empty 'headline' list of comparisons"
SHAPES = {
    "baseline": "baseline must be a configuration label or an encoding, got {value!r}",
    "headline": NOT_A_FAMILY + " ({{table: test|concat|degradation|..., compared_on: ..., configs: [...]}})",
    "rule": "rule {value!r} is not a decision rule; use {rules} (study/stats/rules.py; a new family names {current})",
    "seeds": "seeds must be a non-empty list of distinct integers (the planned seeds), got {value!r}",
    "seed": "seeds holds {value}, which train.py refuses as a seed: each is an integer from 0 to {max_seed}",
    "looks": "looks must be increasing seed counts of at least 2 (e.g. [8, 12, 16, 20]), got {value!r}",
    "spending": "spending {value!r} is not a spending function; use {spending}",
    "spending_equivalence": "spending_equivalence {value!r} is not a spending function; use {spending}",
    "device": "device must be {devices} (the device kind of every run), got {value!r}",
    "precision": "precision must be one of {precisions}, got {value!r}",
    "measures": "{key} must be a mapping of units ({units}) to numbers, got {value!r}",
    "unit": "{key}.{unit} is not a unit of the tables; use {unit_choices}",
    "measure": "{key}.{unit} must be a finite number {bound}, got {value!r}",
    "entry": "headline[{i}] must be {{table: ..., compared_on: ..., configs: [...]}} (table required), got {value!r}",
    "table": "headline[{i}].table {value!r} is not a findings table ({tables})",
    "compared_on": "headline[{i}].compared_on must be a row label (e.g. 'test set', 'k=4')",
    "configs": "headline[{i}].configs must be a list of configurations, e.g. [length/rope], got {value!r}",
    "claim": "headline[{i}].claim must be across or per_set (across the declared test sets or each alone), "
    "got {value!r}",
    "test_sets": "test_sets must be a non-empty list of test sets ({{name: ..., src: ..., ref: ..., sha256: ...}}), "
    "got {value!r}",
}
CHOICES = {  # the choices the lines name
    "rules": f"{', '.join(list(RULES)[:-1])} or {list(RULES)[-1]}",
    "current": CURRENT.name,
    "max_seed": MAX_SEED,
    "spending": " or ".join(SPENDING),
    "devices": f"{', '.join(DEVICES[:-1])} or {DEVICES[-1]}",
    "precisions": ", ".join(PRECISIONS),
    "units": ", ".join(UNITS),
    "unit_choices": " or ".join(UNITS),
    "tables": ", ".join(TABLES),
}


def refusal(shape: str, **given: Any) -> str:
    return SHAPES[shape].format(**CHOICES, **given)


def _refused(line: str) -> PydanticCustomError:
    """A rule of `Family._rules` broken: its line, as pydantic's error."""
    return PydanticCustomError("family", "{line}", {"line": line})


@dataclass(frozen=True)
class Refused:
    """One of pydantic's errors (its ErrorDetails), as fields."""

    type: str
    loc: tuple
    msg: str
    input: Any
    ctx: Optional[dict] = None


def _line(error: Refused, raw: Any) -> str:
    """The one line (after the file's name) saying what `error` refuses in `raw` (the file as read)."""
    loc, kind = error.loc, error.type
    if kind in ("family", "test_set"):  # a rule of `Family._rules` or of a test set: its line
        return error.msg
    if not loc:
        return NOT_A_FAMILY
    key, value = loc[0], written(raw, loc[:1])
    if key == "headline" and len(loc) > 1:
        i, part, entry = loc[1], (loc[2:] or ("",))[0], written(raw, loc[:2])
        part = "entry" if part not in ("table", "compared_on", "configs", "claim") or kind == "missing" else part
        return refusal(part, i=i, value=entry if part == "entry" else entry.get(part))
    if key == "test_sets" and len(loc) > 1:
        return test_set_refusal(loc[1], (loc[2:] or (None,))[0], written(raw, loc[:2]))
    measures = Family.model_fields[key].annotation
    if isinstance(measures, type) and issubclass(measures, Measures):
        if len(loc) == 1:
            return refusal("measures", key=key, value=value)
        shape = "unit" if kind == "extra_forbidden" else "measure"
        return refusal(shape, key=key, unit=loc[1], bound=measures.BOUND, value=error.input)
    if key == "seeds" and len(loc) > 1 and kind in ("greater_than_equal", "less_than_equal"):
        return refusal("seed", value=error.input)
    return refusal(key, value=value)


def _read(path: str):
    import yaml

    from settings.config import ConfigError
    from settings.yaml_files import StrictLoader

    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=StrictLoader)
    except OSError as e:
        raise ConfigError(
            f"--family {path}: cannot read it ({e.strerror}); give the study's configs/<study>/findings/headline.yaml"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text: a family file is YAML; save it as UTF-8") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(e).split())}); fix the file") from None


def load_family(path: Optional[str], configs: Optional[Path] = None) -> Family:
    """The family declared in `path` (its configurations under `configs`, default the project's
    configs/, read when called), or NO_FAMILY."""
    if path is None:
        return NO_FAMILY
    configs = CONFIGS if configs is None else configs
    from settings.config import ConfigError

    raw = _read(path)
    try:
        family = Family.model_validate(raw, context=configs)
    except pydantic.ValidationError as e:
        errors = [Refused(**error) for error in e.errors(include_url=False)]
        unknown = sorted(str(e.loc[0]) for e in errors if e.type == "extra_forbidden" and len(e.loc) == 1)
        if unknown:
            raise ConfigError(
                f"{path}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(Family.model_fields)}"
            ) from None
        raise ConfigError(f"{path}: {_line(errors[0], raw)}") from None
    return family.at(str(path))
