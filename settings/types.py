"""How every config section reads its values (the schema's sections and each encoding's options):
pydantic in strict mode (a section is a mapping; no "5" for 5, no 1 for true), no unknown key, no
nan or inf; a number key also reads text that is a number, as the hand-written loader did (YAML 1.1
reads `1e-3` and `nan` as text)."""

from __future__ import annotations

import typing
from typing import Any

import pydantic

STRICT = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)


def _is_float(tp: Any) -> bool:
    """float, Optional[float], Annotated[float, ...], or a list or pair of them."""
    if tp is float:
        return True
    return typing.get_origin(tp) is not None and any(_is_float(a) for a in typing.get_args(tp) if a is not type(None))


def _text_number(value: Any) -> Any:
    """'1e-3' -> 0.001, 'nan' -> nan (then refused as not finite); anything else unchanged."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return value


def numbers_from_text(raw: Any, section: type) -> Any:
    """`raw` with the text of every number key of `section` (a pydantic dataclass) read as a number,
    sections below it included."""
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    for name, field in getattr(section, "__pydantic_fields__", {}).items():
        if name not in out:
            continue
        tp = field.annotation
        if hasattr(tp, "__pydantic_fields__"):
            out[name] = numbers_from_text(out[name], tp)
        elif _is_float(tp):
            value = out[name]
            out[name] = [_text_number(v) for v in value] if isinstance(value, list) else _text_number(value)
    return out
