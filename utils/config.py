"""Experiment configuration loader: YAML (with `base:` inheritance) -> validated nested dataclasses
(the schema: `utils/config_schema.py`).

A config file may name a `base:` file (path relative to itself); its keys are merged
recursively under the child's. Dotted overrides (`--set model.positional.name=rope`) are
applied last. Every key is checked against the dataclass schema below: an unknown key or
an invalid value raises `ConfigError` naming the key and listing the valid choices.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Optional, Union, get_args, get_origin

import yaml

from utils.config_checks import validate  # re-exported: the cross-key checks load_config runs
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
from utils.config_yaml import StrictLoader, read_yaml
from utils.encoding_registry import registered_encodings
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
    "from_dict",
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
        cfg = from_dict(ExperimentConfig, raw, "")
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


def to_dict(cfg: Any) -> dict:
    """Dataclass -> plain dict (tuples become lists) suitable for YAML/JSON."""

    def conv(v: Any) -> Any:
        if isinstance(v, PositionalConfig):  # the encoding's options sit beside `name`, as in YAML
            return {"name": v.name, **conv(v.options)}
        if dataclasses.is_dataclass(v):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return conv(cfg)


def dump_text(cfg: ExperimentConfig) -> str:
    """The resolved config as train.py writes it to <run>/config.yaml."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


# ----------------------------------------------------------------------------- validation


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def from_dict(cls: type, raw: Any, prefix: str) -> Any:
    """Build dataclass `cls` from a mapping, checking keys and value types."""
    where = prefix or "config"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of keys, got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            raise ConfigError(
                f"unknown config key '{dotted}'.{_suggest(str(key), names)} "
                f"Valid keys{' in ' + prefix if prefix else ''}: {', '.join(names)}"
            )
        kwargs[key] = _convert(hints[key], value, dotted)
    return cls(**kwargs)


def _convert(tp: Any, value: Any, key: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            if type(None) in get_args(tp):
                return None
            raise ConfigError(f"config key '{key}' may not be empty")
        return _convert(args[0], value, key)
    if origin is Literal:
        choices = list(get_args(tp))
        if value not in choices:
            raise ConfigError(
                f"invalid value {value!r} for config key '{key}'. Valid choices: {', '.join(map(str, choices))}"
            )
        return value
    if tp is PositionalConfig:
        return _positional_from_dict(value, key)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}' must be a list, got {value!r}")
        return [_convert(get_args(tp)[0], v, key) for v in value]
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(get_args(tp)):
            raise ConfigError(f"config key '{key}' must be a list of {len(get_args(tp))} numbers, got {value!r}")
        return tuple(_convert(a, v, key) for a, v in zip(get_args(tp), value))
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"config key '{key}' must be a mapping, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config key '{key}' must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config key '{key}' must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads `1e-3` (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config key '{key}' must be a number, got {value!r}")
        if not math.isfinite(value):  # nan or inf: no rate, size or penalty means anything then
            raise ConfigError(f"config key '{key}' must be a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key '{key}' must be a string, got {value!r}")
        return value
    return value


# Option names of the release before each encoding declared its own options (one flat bag of keys,
# where a key of another encoding was accepted and ignored). A config (or a saved run's config.yaml,
# a checkpoint) that uses one still loads in this release, with a note: its keys are renamed, and
# keys the chosen encoding does not take are dropped, as they were ignored then.
LEGACY_POSITIONAL_KEYS = {
    "rope_theta": "theta",
    "rope_fraction": "fraction",
    "rope_layout": "layout",
    "shape_max_shift": "max_shift",
    "shape_inference_shift": "inference_shift",
    "max_positions": "max_positions",
    "cross_attention": "cross_attention",
    "num_buckets": "num_buckets",
    "max_distance": "max_distance",
    "clip_distance": "clip_distance",
}
_RENAMED = [old for old, new in LEGACY_POSITIONAL_KEYS.items() if old != new]
_legacy_noted = False


def _migrate_positional(options: dict, name: str, valid: list[str], key: str) -> dict:
    """Old flat option names -> this encoding's options (see LEGACY_POSITIONAL_KEYS)."""
    global _legacy_noted
    if not any(k in options for k in _RENAMED):
        return options
    migrated = {}
    for k, value in options.items():
        new = LEGACY_POSITIONAL_KEYS.get(k, k)
        if new in valid:
            migrated[new] = value
        elif k not in LEGACY_POSITIONAL_KEYS:
            migrated[k] = value  # not an old key: refused below as usual
    if not _legacy_noted:
        _legacy_noted = True
        renames = ", ".join(f"{old} -> {LEGACY_POSITIONAL_KEYS[old]}" for old in _RENAMED)
        print(
            f"note: {key} uses the option names of the previous release ({renames}); they load in this "
            f"release only, and options that {name!r} does not take are ignored. Write {key}: "
            f"{{name: {name}{''.join(f', {k}: ...' for k in valid)}}}",
            file=sys.stderr,
        )
    return migrated


def _positional_from_dict(raw: Any, key: str) -> PositionalConfig:
    """`{name: rope, theta: 500.0}` -> PositionalConfig(name, options of that encoding, defaults filled)."""
    POSITIONAL_ENCODINGS = registered_encodings()  # each encoding declares its options
    if not isinstance(raw, dict):
        raise ConfigError(f"{key}: expected a mapping of keys, got {raw!r}")
    options = dict(raw)
    name = options.pop("name", PositionalConfig.name)
    if name not in POSITIONAL_ENCODINGS:
        raise ConfigError(
            f"invalid value {name!r} for config key '{key}.name'. "
            f"Valid choices: {', '.join(sorted(POSITIONAL_ENCODINGS))}"
        )
    options_cls = POSITIONAL_ENCODINGS[name].Options
    valid = [f.name for f in dataclasses.fields(options_cls)]
    options = _migrate_positional(options, name, valid, key)
    for option in options:
        if option not in valid:
            takers = sorted(
                n
                for n, cls in POSITIONAL_ENCODINGS.items()
                if option in {f.name for f in dataclasses.fields(cls.Options)}
            )
            raise ConfigError(
                f"config key '{key}.{option}' is not an option of the {name!r} encoding"
                + (f" (it is one of: {', '.join(takers)})" if takers else "")
                + ". "
                + (f"Options of {name!r}: {', '.join(valid)}." if valid else f"{name!r} takes no options.")
                + _suggest(str(option), ["name", *valid])
            )
    return PositionalConfig(name=name, options=dataclasses.asdict(from_dict(options_cls, options, key)))


def flatten(d: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}: nested config sections as dotted keys."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
