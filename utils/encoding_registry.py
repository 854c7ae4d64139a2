"""The positional encodings by name, as the config sees them: each encoding registers itself here
(`models/positional_encodings/base.py: register`), so that config validation and the key roles
in utils/ can read every encoding's name, `Options` dataclass and `check_options` without
importing the models above them (docs/DESIGN.md, "Layers").

The one cost of registration is an import order: the encodings must be imported before a config
is read. `commands/` and every test import them; code that forgets gets one clear error here
rather than "invalid encoding"."""

from __future__ import annotations

POSITIONAL_ENCODINGS: dict[str, type] = {}


def registered_encodings() -> dict[str, type]:
    """{name: encoding class} of every registered positional encoding."""
    if not POSITIONAL_ENCODINGS:
        raise RuntimeError(
            "no positional encoding is registered: import models.positional_encodings before "
            "reading a config (the commands do)"
        )
    return POSITIONAL_ENCODINGS
