"""How every config section reads its values (the schema's sections and each encoding's options):
pydantic in strict mode (a section is a mapping; no "5" for 5, no 1 for true), no unknown key, no
nan or inf; a number key also reads text that is a number, as the hand-written loader did (YAML 1.1
reads `1e-3` and `nan` as text)."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic

STRICT = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)


def text_number(value: Any) -> Any:
    """'1e-3' -> 0.001, 'nan' -> nan (then refused as not finite); anything else unchanged."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return value


Number = Annotated[float, pydantic.BeforeValidator(text_number)]  # a float key of the schema
