"""The positional encodings by name, as the config sees them: each encoding registers itself here
(`models/positional_encodings/base.py: register`), so that config validation and the key roles
in utils/ can read every encoding's name, `Options` dataclass and `check_options` without
importing the models above them (docs/DESIGN.md, "Layers").

The first question loads the package the encodings live in (ENCODINGS_PACKAGE, by name: a plugin
lookup, as fairseq's registries import their folders), so `load_config` works from a fresh
interpreter with no import order to know."""

from __future__ import annotations

import importlib

ENCODINGS_PACKAGE = "models.positional_encodings"
POSITIONAL_ENCODINGS: dict[str, type] = {}


def registered_encodings() -> dict[str, type]:
    """{name: encoding class} of every registered positional encoding."""
    if not POSITIONAL_ENCODINGS:
        importlib.import_module(ENCODINGS_PACKAGE)  # its modules register themselves
    return POSITIONAL_ENCODINGS
