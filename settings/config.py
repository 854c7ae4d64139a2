"""Experiment configuration loader: YAML (with `base:` inheritance) -> validated nested dataclasses
(the schema: `settings/schema.py`, checked by pydantic).

A config file may name a `base:` file (path relative to itself); its keys are merged
recursively under the child's. Dotted overrides (`--set model.positional.name=rope`) are
applied last. Every key is checked against the schema: an unknown key or an invalid value
raises `ConfigError` naming the key and listing the valid choices.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import pydantic
import yaml

from settings.checks import validate  # re-exported: the cross-key checks load_config runs
from settings.errors import validation_error
from settings.schema import (  # re-exported (__all__): callers import the schema from here too
    DataConfig,
    DecodingConfig,
    EvaluationConfig,
    ExperimentConfig,
    ModelConfig,
    PositionalConfig,
    ScheduleConfig,
    TokenizerConfig,
    TrainConcatConfig,
    TrainingConfig,
)
from settings.types import numbers_from_text
from settings.yaml_files import NumbersLoader, deep_merge, read_yaml
from utils.errors import ConfigError, HarnessError
from utils.files import atomic_write_text

__all__ = [
    "ConfigError",
    "DataConfig",
    "DecodingConfig",
    "EvaluationConfig",
    "ExperimentConfig",
    "ModelConfig",
    "Override",
    "PositionalConfig",
    "ScheduleConfig",
    "TokenizerConfig",
    "TrainConcatConfig",
    "TrainingConfig",
    "apply_overrides",
    "dump_config",
    "dump_text",
    "flatten",
    "from_raw",
    "is_written_config",
    "load_config",
    "parse_override",
    "to_dict",
    "validate",
    "with_set",
]


# ----------------------------------------------------------------------------- loading


@dataclasses.dataclass(frozen=True)
class Override:
    """One `--set key.sub=value`, parsed once: its dotted path, its value (read as YAML, its numbers as
    YAML 1.2 reads them: settings/yaml_files.NumbersLoader) and the text as given (errors quote it; a
    job's command line carries it)."""

    keys: tuple[str, ...]
    value: Any
    text: str

    @classmethod
    def of(cls, key: str, value: Any, text: Optional[str] = None) -> Override:
        """A typed value set in code (a flag argparse typed, a variant's recorded setting): never turned
        into text and read back; `text` (default `key=value`) is what a message quotes."""
        return cls(tuple(key.split(".")), value, text if text is not None else f"{key}={value}")

    @property
    def key(self) -> str:
        return ".".join(self.keys)

    def leaves(self) -> dict[str, Any]:
        """{dotted key: value} of every key this override sets (a section given whole sets several)."""
        return flatten(self.value, f"{self.key}.") if isinstance(self.value, dict) else {self.key: self.value}


def parse_override(text: str | Override) -> Override:
    """`model.positional.name=rope` -> Override(('model', 'positional', 'name'), 'rope', text)."""
    if isinstance(text, Override):
        return text
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.sub=value (e.g. model.positional.name=rope)")
    key, value = text.split("=", 1)
    keys = tuple(k for k in key.strip().split(".") if k)
    if not keys:
        raise ConfigError(f"override {text!r} has an empty key")
    if not value.strip():
        return Override(keys, None, text)
    try:  # the file's loader (a key given twice or an alias bomb is refused here too), numbers as YAML 1.2
        return Override(keys, yaml.load(value, Loader=NumbersLoader), text)
    except yaml.YAMLError as e:
        quote = f"; quote a text: --set '{key.strip()}=\"...\"'"
        hint = "" if isinstance(e, yaml.constructor.ConstructorError) else quote
        raise ConfigError(f"override {text!r}: invalid YAML value ({' '.join(str(e).split())}){hint}") from None


def apply_overrides(raw: dict, overrides: Sequence[str | Override]) -> dict:
    """`raw` with the overrides applied in order. A section given whole (`decoding={beam_size: 3}`) merges
    into the section, so the keys it does not name keep their values (a section naming another `name`,
    e.g. another encoding, replaces it: its options are that one's); one key given two values in two
    forms (`decoding.beam_size=1` and `decoding={beam_size: 3}`) is refused in one line naming both."""
    out = copy.deepcopy(raw)
    given: dict[str, tuple[Any, Override]] = {}
    for override in map(parse_override, overrides):
        _check_forms(override, given)
        node = out
        for k in override.keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {override.text!r}: {k} is not a section")
        key, value = override.keys[-1], override.value
        earlier = node.get(key)
        merge = (
            isinstance(value, dict)
            and isinstance(earlier, dict)
            and value.get("name", earlier.get("name")) == earlier.get("name")
        )
        node[key] = deep_merge(earlier, value) if merge else value
    return out


def _check_forms(override: Override, given: dict) -> None:
    """Refuse a key this override sets to another value than an earlier override of the other form did."""
    section = isinstance(override.value, dict)
    for key, value in override.leaves().items():
        if key in given and given[key][0] != value and isinstance(given[key][1].value, dict) != section:
            raise ConfigError(
                f"--set {given[key][1].text} and --set {override.text} give {key} two values ({given[key][0]!r} "
                f"and {value!r}): keep one of them"
            )
        given[key] = (value, override)


def load_config(
    path: Optional[str | Path] = None, overrides: Optional[Sequence[str | Override]] = None, raw: Optional[dict] = None
) -> ExperimentConfig:
    """Load a YAML file (or an already-read mapping), apply overrides (`--set` texts or parsed), validate."""
    if raw is None:
        if path is None:
            raise ConfigError("no config given: pass --config <file.yaml> (see configs/) or --run <run folder>")
        raw = read_yaml(Path(path))
    else:
        raw = copy.deepcopy(raw)
        raw.pop("base", None)
    patch = [parse_override(o) for o in overrides or []]  # parsed once; its errors name the --set
    raw = apply_overrides(raw, patch)
    try:
        cfg = from_raw(raw)
        validate(cfg)
    except ConfigError as e:
        raise named_source(e, path, patch) from None
    return cfg


def with_set(cfg: ExperimentConfig, overrides: Sequence[Override]) -> ExperimentConfig:
    """`cfg` with top-level keys that no check across keys reads (`seed`, `run_dir`) set by typed
    overrides, each checked as load_config checks it (its type and bounds, the error naming the
    override), the sections kept as validated: one config validated once gives a sweep's runs of
    it, one per seed and run folder."""
    values = {o.key: o.value for o in overrides}
    if any(len(o.keys) != 1 or o.key not in ("seed", "run_dir") for o in overrides):
        raise ValueError(f"with_set sets seed and run_dir only, not {sorted(values)}")
    try:
        return dataclasses.replace(cfg, **values)
    except pydantic.ValidationError as e:
        raise named_source(validation_error(e, values, "", ExperimentConfig), None, list(overrides)) from None


def named_source(error: ConfigError, path: Optional[str | Path], overrides: list[Override]) -> ConfigError:
    """`error` prefixed with where its value was given (`error_source`), or as it is."""
    source = error_source(str(error), path, overrides)
    return error if source is None else ConfigError(f"{source}: {error}")


def error_source(message: str, path: Optional[str | Path], overrides: list[Override]) -> Optional[str]:
    """Where the value an error names was given: the `--set` that names its key, else the config
    file (None when the message already names it, or there is no file). A message of several values
    names the file and says that --set values are among them."""
    if "\n" in message and path is not None:
        return f"{path}{' with its --set values' if overrides else ''}"
    for override in reversed(overrides):  # the last --set of a key is the one that holds
        key = override.text.split("=", 1)[0].strip()
        if f"'{key}" in message or f"{key} " in message or f"{key}=" in message:
            return f"--set {override.text}"
    if path is None or str(path) in message:
        return None
    return str(path)


@functools.cache
def _adapter(cls: type) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(cls)


def from_raw(raw: Any) -> ExperimentConfig:
    """A mapping of config keys (YAML as read) -> ExperimentConfig, every key and value checked.
    Validated as JSON, pydantic's strict mode takes a section as a mapping, never "5" for 5 or 1
    for true (a number key's text that is a number is read first: settings/types.py); a value
    JSON cannot hold (a YAML date) reaches it as an object no key accepts."""
    numbers = numbers_from_text(raw, ExperimentConfig)
    text = json.dumps(numbers, default=lambda value: {"unsupported": repr(value)})
    try:
        return _adapter(ExperimentConfig).validate_json(text, strict=True)
    except pydantic.ValidationError as e:
        raise validation_error(e, raw, "", ExperimentConfig) from None


def to_dict(cfg: Any) -> dict:
    """A config (or one of its sections) -> plain dict (tuples become lists) suitable for YAML/JSON;
    an encoding's options sit beside `name`, as in YAML."""
    return _adapter(type(cfg)).dump_python(cfg, mode="json")


def dump_text(cfg: ExperimentConfig) -> str:
    """The resolved config as train.py writes it to <run>/config.yaml."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def flatten(d: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}: nested config sections as dotted keys."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def dump_config(cfg: ExperimentConfig, path: str | Path) -> None:
    """The resolved config written atomically as train.py writes <run>/config.yaml (`dump_text`)."""
    atomic_write_text(path, dump_text(cfg))


def is_written_config(path: Path) -> bool:
    """config.yaml exactly as train.py writes it (the resolved config, dumped), not a hand-written
    config of the user's that happens to sit in the folder."""
    try:
        return path.read_text(encoding="utf-8") == dump_text(load_config(path))
    except (OSError, UnicodeDecodeError, HarnessError):
        return False
