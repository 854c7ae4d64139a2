"""pydantic's validation errors as the config's one-line errors: the dotted key, the value as written,
and what would be valid (the choices, the valid keys with a close match, the bound broken). A key or
type error is reported first, alone; bounds are all reported at once, one line each."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, Union

import pydantic

from utils.errors import ConfigError

WORDS = {"greater_than_equal": "at least", "greater_than": "above", "less_than_equal": "at most", "less_than": "below"}
KINDS = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
    "finite_number": "a finite number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
}
SECTION_TYPES = {"dataclass_type", "dataclass_args_type", "model_type"}
TUPLE_TYPES = {"tuple_type", "missing", "too_short", "too_long"}


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def _unwrapped(tp: Any) -> Any:
    """Optional[X] -> X, Annotated[X, ...] -> X."""
    while True:
        if typing.get_origin(tp) in (Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        elif typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        else:
            return tp


def _field(cls: type, path: list[str]) -> tuple[Any, pydantic.fields.FieldInfo | None]:
    """(the annotation without Optional, the FieldInfo) of the key at `path` below section `cls`."""
    info = None
    for name in path:
        info = getattr(cls, "__pydantic_fields__", {}).get(name)
        if info is None:
            return None, None
        cls = _unwrapped(info.annotation)
    return cls, info


def _raw(raw: Any, loc: tuple) -> Any:
    """The value as written at `loc` (a missing item: its list)."""
    for part in loc:
        if isinstance(raw, dict) and part in raw:
            raw = raw[part]
        elif isinstance(raw, list) and isinstance(part, int) and part < len(raw):
            raw = raw[part]
        else:
            break
    return raw


def _bound_line(key: str, kind: str, limit: float, written: Any, tp: Any, info: Any) -> str:
    if isinstance(written, (list, tuple)):  # a list's or pair's elements, as converted
        floats = float in [_unwrapped(a) for a in typing.get_args(tp)]
        shown, each = [float(v) if floats else v for v in written], "each of "
    else:
        shown, each = float(written) if tp is float else written, ""
    extra = (info.json_schema_extra or {}) if info is not None else {}
    null = f" (or null: {extra['null']})" if extra.get("null") else ""
    return f"{each}{key} must be {WORDS[kind]} {limit:g}{null}, got {shown!r}"


def _line(error: dict, key: str, raw: Any, cls: type) -> str:
    """One line for a key or type error."""
    kind, loc = error["type"], error["loc"]
    path = [p for p in loc if isinstance(p, str)]
    tp, _ = _field(cls, path)
    if kind == "unexpected_keyword_argument":
        section, _ = _field(cls, path[:-1]) if path[:-1] else (cls, None)
        names = list(getattr(section, "__pydantic_fields__", {}))
        where = key.rpartition(".")[0]
        return (
            f"unknown config key '{key}'.{suggest(path[-1], names)} "
            f"Valid keys{' in ' + where if where else ''}: {', '.join(names)}"
        )
    if kind == "literal_error":
        choices = typing.get_args(tp)
        return f"invalid value {_raw(raw, loc)!r} for config key '{key}'. Valid choices: {', '.join(map(str, choices))}"
    if kind in SECTION_TYPES:
        return f"{key or 'config'}: expected a mapping of keys, got {_raw(raw, loc)!r}"
    if kind in TUPLE_TYPES and typing.get_origin(tp) is tuple:
        return f"config key '{key}' must be a list of {len(typing.get_args(tp))} numbers, got {_raw(raw, path)!r}"
    if kind in KINDS:  # (a non-finite number: as read, 'nan' -> nan)
        shown = error["input"] if kind == "finite_number" else _raw(raw, loc)
        return f"config key '{key}' must be {KINDS[kind]}, got {shown!r}"
    return f"config key '{key}': {error['msg']}"


def validation_error(error: pydantic.ValidationError, raw: Any, prefix: str, cls: type) -> ConfigError:
    """The ConfigError for pydantic's errors on `raw` validated as `cls` (its keys below `prefix`)."""
    bounds: dict[str, str] = {}
    for e in error.errors():
        if e["type"] == "value_error" and isinstance(e.get("ctx", {}).get("error"), ConfigError):
            return e["ctx"]["error"]  # a section that checks itself (model.positional) said it
        path = [p for p in e["loc"] if isinstance(p, str)]
        key = prefix + ".".join(path)
        if e["type"] not in WORDS:
            return ConfigError(_line(e, key, raw, cls))
        tp, info = _field(cls, path)
        limit = next(iter(e["ctx"].values()))
        bounds.setdefault(key, _bound_line(key, e["type"], limit, _raw(raw, path), tp, info))
    lines = list(bounds.values())
    if len(lines) == 1:
        return ConfigError(lines[0])
    return ConfigError(f"{len(lines)} config values are out of bounds:\n  " + "\n  ".join(lines))
