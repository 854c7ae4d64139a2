"""`model.positional`: the encoding's `name` and its own options, written flat beside it in YAML
(`positional: {name: rope, theta: 500.0}`). The set of encodings is open (each registers itself with
its `Options` dataclass: models/positional_encodings/base.py), so this section validates itself: pydantic
calls `PositionalConfig.parse` for it and asks it for its JSON Schema (one branch per encoding)."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from typing import Any

import pydantic
from pydantic_core import core_schema

from models.positional_options import ENCODING_OPTIONS
from settings.errors import suggest, validation_error
from settings.types import STRICT, numbers_from_text
from utils.errors import ConfigError


@functools.cache
def _options_model(options_cls: type) -> type:
    """An encoding's `Options` dataclass with the config's checks (STRICT)."""
    return pydantic.dataclasses.dataclass(options_cls, config=STRICT)


@functools.cache
def _options_adapter(options_cls: type) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(_options_model(options_cls))


def _option_names(options_cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(options_cls)]


@dataclasses.dataclass
class PositionalConfig:
    """Positional-encoding strategy: `name` picks it from the registry (models/positional_encodings/);
    `options` holds every option of that encoding, its defaults filled."""

    name: str = "sinusoidal"
    options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):  # a section left out gets the encoding's defaults, as a written one does
        options = ENCODING_OPTIONS.get(self.name)
        if options is not None:
            self.options = {**dataclasses.asdict(options()), **self.options}

    @classmethod
    def parse(cls, raw: Any, key: str = "model.positional") -> PositionalConfig:
        """`{name: rope, theta: 500.0}` -> PositionalConfig, each option checked as the schema's keys are."""
        encodings = ENCODING_OPTIONS
        if not isinstance(raw, dict):
            raise ConfigError(f"{key}: expected a mapping of keys, got {raw!r}")
        options = dict(raw)
        name = options.pop("name", cls.name)
        if name not in encodings:
            raise ConfigError(
                f"invalid value {name!r} for config key '{key}.name'. Valid choices: {', '.join(sorted(encodings))}"
            )
        valid = _option_names(encodings[name])
        options = _migrate(options, name, valid, key)
        for option in options:
            if option not in valid:
                takers = sorted(n for n, e in encodings.items() if option in _option_names(e))
                raise ConfigError(
                    f"config key '{key}.{option}' is not an option of the {name!r} encoding"
                    + (f" (it is one of: {', '.join(takers)})" if takers else "")
                    + ". "
                    + (f"Options of {name!r}: {', '.join(valid)}." if valid else f"{name!r} takes no options.")
                    + suggest(str(option), ["name", *valid])
                )
        options = numbers_from_text(options, _options_model(encodings[name]))
        adapter = _options_adapter(encodings[name])
        try:
            parsed = adapter.validate_json(json.dumps(options, default=repr), strict=True)
        except pydantic.ValidationError as e:
            raise validation_error(e, options, f"{key}.", _options_model(encodings[name])) from None
        return cls(name=name, options=dataclasses.asdict(parsed))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            lambda raw: cls.parse({"name": raw.name, **raw.options} if isinstance(raw, cls) else raw),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda p: {"name": p.name, **p.options}),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict:
        """One branch per encoding: its `name` and its options (a branch without `name` is sinusoidal)."""
        branches = []
        for name, encoding_options in sorted(ENCODING_OPTIONS.items()):
            options = _options_adapter(encoding_options).json_schema()
            branch = {
                "type": "object",
                "title": name,
                "properties": {"name": {"const": name}, **options.get("properties", {})},
                "additionalProperties": False,
            }
            if name != cls.name:
                branch["required"] = ["name"]
            branches.append(branch)
        about = "the positional encoding: `name` (default sinusoidal) and that encoding's own options beside it"
        return {"description": about, "oneOf": branches}


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


def _migrate(options: dict, name: str, valid: list[str], key: str) -> dict:
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
