"""Experiment configuration loader: YAML (with `base:` inheritance) -> validated nested dataclasses
(the schema: `utils/config_schema.py`, checked by pydantic).

A config file may name a `base:` file (path relative to itself); its keys are merged
recursively under the child's. Dotted overrides (`--set model.positional.name=rope`) are
applied last. Every key is checked against the schema: an unknown key or an invalid value
raises `ConfigError` naming the key and listing the valid choices.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any, Optional

import pydantic
import yaml

from utils.config_checks import validate  # re-exported: the cross-key checks load_config runs
from utils.config_errors import validation_error
from utils.config_schema import (  # re-exported (__all__): callers import the schema from here too
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
from utils.config_types import numbers_from_text
from utils.config_yaml import StrictLoader, read_yaml
from utils.errors import ConfigError

__all__ = [
    "ConfigError",
    "DataConfig",
    "DecodingConfig",
    "EvaluationConfig",
    "ExperimentConfig",
    "ModelConfig",
    "PositionalConfig",
    "ScheduleConfig",
    "TokenizerConfig",
    "TrainConcatConfig",
    "TrainingConfig",
    "apply_overrides",
    "dump_text",
    "flatten",
    "from_raw",
    "load_config",
    "parse_override",
    "to_dict",
    "validate",
]


# ----------------------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[list[str], Any]:
    """`model.positional.name=rope` -> (['model', 'positional', 'name'], 'rope'); values parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.sub=value (e.g. model.positional.name=rope)")
    key, value = text.split("=", 1)
    keys = [k for k in key.strip().split(".") if k]
    if not keys:
        raise ConfigError(f"override {text!r} has an empty key")
    if not value.strip():
        return keys, None
    try:  # the file's loader: a key given twice or an alias bomb is refused here too
        return keys, yaml.load(value, Loader=StrictLoader)
    except yaml.YAMLError as e:
        quote = f"; quote a text: --set '{key.strip()}=\"...\"'"
        hint = "" if isinstance(e, yaml.constructor.ConstructorError) else quote
        raise ConfigError(f"override {text!r}: invalid YAML value ({' '.join(str(e).split())}){hint}") from None


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    out = copy.deepcopy(raw)
    for text in overrides:
        keys, value = parse_override(text)
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {k} is not a section")
        node[keys[-1]] = value
    return out


def load_config(
    path: Optional[str | Path] = None, overrides: Optional[list[str]] = None, raw: Optional[dict] = None
) -> ExperimentConfig:
    """Load a YAML file (or an already-read mapping), apply overrides, validate."""
    if raw is None:
        if path is None:
            raise ConfigError("no config given: pass --config <file.yaml> (see configs/) or --run <run folder>")
        raw = read_yaml(Path(path))
    else:
        raw = copy.deepcopy(raw)
        raw.pop("base", None)
    raw = apply_overrides(raw, overrides or [])  # its errors name the --set
    try:
        cfg = from_raw(raw)
        validate(cfg)
    except ConfigError as e:
        source = error_source(str(e), path, overrides or [])
        if source is None:
            raise
        raise ConfigError(f"{source}: {e}") from None
    return cfg


def error_source(message: str, path: Optional[str | Path], overrides: list[str]) -> Optional[str]:
    """Where the value an error names was given: the `--set` that names its key, else the config
    file (None when the message already names it, or there is no file). A message of several values
    names the file and says that --set values are among them."""
    if "\n" in message and path is not None:
        return f"{path}{' with its --set values' if overrides else ''}"
    for text in reversed(overrides):  # the last --set of a key is the one that holds
        key = text.split("=", 1)[0].strip()
        if key and (f"'{key}" in message or f"{key} " in message or f"{key}=" in message):
            return f"--set {text}"
    if path is None or str(path) in message:
        return None
    return str(path)


@functools.cache
def _adapter(cls: type) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(cls)


def from_raw(raw: Any) -> ExperimentConfig:
    """A mapping of config keys (YAML as read) -> ExperimentConfig, every key and value checked.
    Validated as JSON, pydantic's strict mode takes a section as a mapping, never "5" for 5 or 1
    for true (a number key's text that is a number is read first: utils/config_types.py); a value
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
