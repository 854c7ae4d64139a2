"""A study's declared family (configs/<study>/findings/headline.yaml): the comparisons that may be
worded, the rule that words them (study/stats/rules.py), and the study's plan (seeds, device,
precision, margins), read under the configs' rules.

The file is read by the configs' strict YAML reader (a key given twice is an error, aliases that
expand beyond a config's size are refused) and checked against a typed schema: margins and effects
finite numbers keyed by the units the tables spell (sacreBLEU, NLL), each headline entry a known
table with `configs` a list of configurations that exist under configs/, the baseline an encoding or
such a configuration, seeds distinct integers train.py takes as a seed (0 to 2^32 - 1). Every error
is one line naming the file and the key, when the family is read: before the runner trains a run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from settings.schema import MAX_SEED
from study.records import ComparisonRow, FindingsTable, JsonObject
from study.stats.rules import CURRENT, RULES, UNNAMED
from study.stats.seed_test import ALPHA, DEFAULT_EFFECT, DEFAULT_TIE_MARGIN
from study.stats.sequential import SPENDING
from study.stats.sequential_family import Plan

FAMILY_KEYS = (
    "baseline",
    "headline",
    "rule",
    "tie_margin",
    "effect",
    "equivalence",
    "seeds",
    "looks",
    "spending",
    "spending_equivalence",
    "device",
    "precision",
)
TABLES = ("degradation", "test", "concat", "buckets", "teacher_forced")  # study/judge/findings.py's tables
UNITS = ("sacreBLEU", "NLL")  # the metrics the tables are in
PRECISIONS = ("fp32", "bf16", "fp16")
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@dataclass
class Family:
    """A study's headline comparisons, declared before its runs (configs/<study>/findings/headline.yaml)."""

    path: Optional[str] = None
    baseline: Optional[str] = None
    headline: list[dict] = field(default_factory=list)  # {table, compared_on?, configs?}
    tie_margin: dict = field(default_factory=lambda: dict(DEFAULT_TIE_MARGIN))
    effect: dict = field(default_factory=lambda: dict(DEFAULT_EFFECT))
    # the plan, declared with the comparisons: every seed each configuration runs with (until all
    # exist the pages are interim and word no verdict), the device kind and precision of every run,
    # and each measure's equivalence margin m ("equivalent within ±m" is a finding of its own)
    seeds: Optional[list[int]] = None
    device: Optional[str] = None
    precision: Optional[str] = None
    equivalence: dict = field(default_factory=dict)
    # the decision rule the family was declared under (a file naming none: study/rules.UNNAMED)
    rule: str = CURRENT.name
    # a sequential plan (study/stats/sequential_family.py): the seeds per configuration at each look, the
    # first n_k of `seeds` (None: one look, at every planned seed), and how each family of tests spends
    # its alpha over the looks
    looks: Optional[tuple[int, ...]] = None
    spending: str = "obrien-fleming"
    spending_equivalence: str = "obrien-fleming"

    @property
    def plan(self) -> Optional[Plan]:
        """The sequential plan, or None for a fixed-seed family (one look once every seed is in)."""
        if self.looks is None:
            return None
        return Plan(self.looks, self.spending, self.spending_equivalence, ALPHA, ALPHA)

    def matching(self, table: str, row: ComparisonRow) -> list[Mapping[str, Any]]:
        """The headline entries that declare this row."""
        return [
            h
            for h in self.headline
            if h["table"] == table
            and (h.get("compared_on") is None or h["compared_on"] == row.compared_on)
            and (h.get("configs") is None or row.config in h["configs"])
        ]

    def declares(self, table: str, row: ComparisonRow) -> bool:
        return bool(self.matching(table, row))


def missing_rows(
    tables: Sequence[FindingsTable], family: Family, configs: Optional[list[str]] = None
) -> list[tuple[str, str]]:
    """(table, config) of every declared comparison that has no row: an entry naming its `compared_on`,
    for each configuration it names (or, for an entry naming none, each compared configuration:
    `configs`), with no such row.
    They count in Holm's family as p = 1 and keep a planned study interim."""
    have = {(t.name, r.config, r.compared_on) for t in tables for r in t.rows}
    out = []
    for h in family.headline:
        if h.get("compared_on") is None:
            continue
        for config in h.get("configs") or configs or []:  # (no list given: only the configs an entry names)
            if (h["table"], config, h["compared_on"]) not in have:
                out.append((h["table"], config))
    return out


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


def _measures(path: str, key: str, given, positive: bool) -> Mapping[str, float]:
    """A {unit: number} mapping of the family (tie_margin, effect, equivalence), checked."""
    from settings.config import ConfigError

    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ConfigError(f"{path}: {key} must be a mapping of units ({', '.join(UNITS)}) to numbers, got {given!r}")
    for unit, value in given.items():
        if unit not in UNITS:
            raise ConfigError(f"{path}: {key}.{unit} is not a unit of the tables; use {' or '.join(UNITS)}")
        finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not finite or value < 0 or (positive and value == 0):
            raise ConfigError(
                f"{path}: {key}.{unit} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}"
            )
    return dict(given)


def _headline(path: str, entries) -> list[Mapping[str, Any]]:
    from settings.config import ConfigError

    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            f"{path}: expected a mapping with a non-empty 'headline' list of comparisons "
            f"({{table: test|concat|degradation|..., compared_on: ..., configs: [...]}})"
        )
    for i, h in enumerate(entries):
        if not isinstance(h, dict) or "table" not in h or set(h) - {"table", "compared_on", "configs"}:
            raise ConfigError(
                f"{path}: headline[{i}] must be {{table: ..., compared_on: ..., configs: [...]}} "
                f"(table required), got {h!r}"
            )
        if h["table"] not in TABLES:
            raise ConfigError(
                f"{path}: headline[{i}].table {h['table']!r} is not a findings table ({', '.join(TABLES)})"
            )
        if "compared_on" in h and not isinstance(h["compared_on"], str):
            raise ConfigError(f"{path}: headline[{i}].compared_on must be a row label (e.g. 'test set', 'k=4')")
        configs = h.get("configs")
        if configs is not None and (not isinstance(configs, list) or not all(isinstance(c, str) for c in configs)):
            raise ConfigError(
                f"{path}: headline[{i}].configs must be a list of configurations, e.g. [length/rope], got {configs!r}"
            )
        for c in configs or []:
            if not (CONFIGS / f"{c}.yaml").is_file():
                raise ConfigError(f"{path}: headline[{i}].configs names {c}, but configs/{c}.yaml does not exist")
    return list(entries)


def _baseline(path: str, baseline) -> Optional[str]:
    """The declared baseline, checked as compare.py matches it: an encoding, or a configuration's
    label (configs/<label>.yaml). A name that is neither would match no run, ever: the study would stay
    interim under a note instead of failing where it is written."""
    from models.positional_encodings import POSITIONAL_ENCODINGS
    from settings.config import ConfigError
    from settings.errors import suggest

    if baseline is None:
        return None
    if not isinstance(baseline, str):
        raise ConfigError(f"{path}: baseline must be a configuration label or an encoding, got {baseline!r}")
    encodings = sorted(POSITIONAL_ENCODINGS)
    if baseline not in encodings and not (CONFIGS / f"{baseline}.yaml").is_file():
        raise ConfigError(
            f"{path}: baseline {baseline!r} is neither an encoding ({', '.join(encodings)}) nor a "
            f"configuration (configs/{baseline}.yaml does not exist).{suggest(baseline, encodings)}"
        )
    return baseline


def load_family(path: Optional[str]) -> Family:
    """The family declared in `path` (YAML), or an empty one (every row descriptive)."""
    if path is None:
        return Family()
    from settings.config import ConfigError

    data = _read(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with a non-empty 'headline' list of comparisons")
    unknown = set(data) - set(FAMILY_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; the keys are {', '.join(FAMILY_KEYS)}")
    headline = _headline(path, data.get("headline"))
    margins = {**DEFAULT_TIE_MARGIN, **_measures(path, "tie_margin", data.get("tie_margin"), positive=False)}
    effects = {**DEFAULT_EFFECT, **_measures(path, "effect", data.get("effect"), positive=False)}
    equivalence = _measures(path, "equivalence", data.get("equivalence"), positive=True)
    baseline = _baseline(path, data.get("baseline"))
    seeds = data.get("seeds")
    listed = isinstance(seeds, list) and seeds and all(type(x) is int for x in seeds)
    if seeds is not None and (not listed or len(set(seeds)) != len(seeds)):
        raise ConfigError(
            f"{path}: seeds must be a non-empty list of distinct integers (the planned seeds), got {seeds!r}"
        )
    for seed in seeds or []:
        if not 0 <= seed <= MAX_SEED:  # train.py's bounds on `seed` (settings/schema.py)
            raise ConfigError(
                f"{path}: seeds holds {seed}, which train.py refuses as a seed: each is an integer from 0 to {MAX_SEED}"
            )
    device, precision = data.get("device"), data.get("precision")
    if device not in (None, "cpu", "cuda", "mps"):
        raise ConfigError(f"{path}: device must be cpu, cuda or mps (the device kind of every run), got {device!r}")
    if precision not in (None, *PRECISIONS):
        raise ConfigError(f"{path}: precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    rule = data.get("rule", UNNAMED.name)
    if rule not in RULES:
        raise ConfigError(
            f"{path}: rule {rule!r} is not a decision rule; use {' or '.join(RULES)} (study/stats/rules.py; "
            f"a new family names {CURRENT.name})"
        )
    looks, spending, spending_equivalence = _looks(path, data, seeds, rule)
    return Family(
        str(path),
        baseline,
        headline,
        margins,
        effects,
        seeds,
        device,
        precision,
        equivalence,
        rule,
        looks,
        spending,
        spending_equivalence,
    )


def _looks(
    path: str, data: JsonObject, seeds: Optional[list[int]], rule: str
) -> tuple[Optional[tuple[int, ...]], str, str]:
    """(looks, spending, spending_equivalence) of a sequential plan, checked: increasing seed counts,
    the last every planned seed, under the current rule."""
    from settings.config import ConfigError

    looks = data.get("looks")
    spending = {key: data.get(key, "obrien-fleming") for key in ("spending", "spending_equivalence")}
    for key, value in spending.items():
        if value not in SPENDING:
            raise ConfigError(f"{path}: {key} {value!r} is not a spending function; use {' or '.join(SPENDING)}")
    if looks is None:
        given = [key for key in spending if key in data]
        if given:
            raise ConfigError(
                f"{path}: {given[0]} is a sequential plan's: give looks too (e.g. looks: [8, 12, 16, 20])"
            )
        return None, spending["spending"], spending["spending_equivalence"]
    counts = isinstance(looks, list) and looks and all(type(n) is int for n in looks)
    if not counts or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ConfigError(
            f"{path}: looks must be increasing seed counts of at least 2 (e.g. [8, 12, 16, 20]), got {looks!r}"
        )
    if seeds is None or len(seeds) != looks[-1]:
        planned = "no seeds" if seeds is None else f"{len(seeds)} seeds"
        raise ConfigError(f"{path}: the last look ({looks[-1]}) is every planned seed, but the family plans {planned}")
    if rule != CURRENT.name:
        raise ConfigError(
            f"{path}: a sequential plan (looks) is read under the rule {CURRENT.name}: add rule: {CURRENT.name}"
        )
    return tuple(looks), spending["spending"], spending["spending_equivalence"]


def family_json_schema() -> Mapping[str, Any]:
    """The JSON Schema of a family file (configs/family.schema.json, for editors), drawn from the
    constants load_family checks against; load_family's own checks go further (configs that exist)."""
    text = {"type": "string", "minLength": 1}

    def measures(above_zero: bool) -> Mapping[str, Any]:
        number = {"type": "number", ("exclusiveMinimum" if above_zero else "minimum"): 0}
        return {"type": "object", "properties": dict.fromkeys(UNITS, number), "additionalProperties": False}

    entry = {
        "type": "object",
        "properties": {
            "table": {"enum": list(TABLES)},
            "compared_on": text,
            "configs": {"type": "array", "items": text},
        },
        "required": ["table"],
        "additionalProperties": False,
    }
    properties = {
        "baseline": text,
        "headline": {"type": "array", "items": entry, "minItems": 1},
        "rule": {"enum": list(RULES)},
        "tie_margin": measures(False),
        "effect": measures(False),
        "equivalence": measures(True),
        "seeds": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
            "minItems": 1,
            "uniqueItems": True,
        },
        "looks": {"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 1, "uniqueItems": True},
        "spending": {"enum": list(SPENDING)},
        "spending_equivalence": {"enum": list(SPENDING)},
        "device": {"enum": ["cpu", "cuda", "mps"]},
        "precision": {"enum": list(PRECISIONS)},
    }
    assert tuple(properties) == FAMILY_KEYS  # one list of keys
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "A study's declared family (configs/<study>/findings/headline.yaml)",
        "type": "object",
        "properties": properties,
        "required": ["headline"],
        "additionalProperties": False,
    }
