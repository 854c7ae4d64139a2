"""What may change each config key, and when: read from the roles the schema declares
(`settings/schema.py`, `setting(role=...)`; an encoding's options in its `Options` dataclass).

- a resume may change TRAINING, RUNTIME, INFERENCE and IDENTITY keys (`check_resume`);
- test.py / inference.py may override only INFERENCE, RUNTIME and IDENTITY keys: anything else
  would score a model other than the one trained (`check_test_time`);
- compare.py groups runs that differ only in SEED, IDENTITY and RUNTIME keys as seeds of one
  configuration (`configuration_settings`): RUNTIME covers how a run ran and what test.py reported
  (decoding.max_tokens, evaluation.*), never what was trained or how it was decoded;
- HParams columns and inference.py's flags are the keys marked `hparam` / `flags`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterator, Optional

from models.positional_options import ENCODING_OPTIONS
from settings.schema import EXPERIMENT, ROLES, ExperimentConfig, PositionalConfig, key_info
from utils.errors import ConfigError

WHEN = {"resume": 0, "test": 1}  # index into ROLES' tuple
POSITIONAL = "model.positional."


def _fields(cls: type = ExperimentConfig, prefix: str = "", inherited: Optional[str] = None) -> Iterator[tuple]:
    """(dotted key, what `setting` declared, role, type) of every key of the schema, sections unfolded
    (a section's role is inherited by keys that declare none); `model.positional` gives `name` only
    (its options: `role_of`)."""
    for name, field in cls.__pydantic_fields__.items():
        info = key_info(field)
        role = info.get("role") or inherited
        tp = field.annotation
        if tp is PositionalConfig:
            yield f"{prefix}{name}.name", info, role, str
        elif hasattr(tp, "__pydantic_fields__"):
            yield from _fields(tp, f"{prefix}{name}.", role)
        else:
            yield f"{prefix}{name}", info, role, tp


@functools.lru_cache(maxsize=1)
def _schema_roles() -> tuple[tuple[str, Optional[str]], ...]:
    return tuple((key, role) for key, _, role, _ in _fields())  # the schema is fixed: walked once


def schema_roles() -> dict[str, Optional[str]]:
    """{dotted key: role} for every key of the schema (None would be a key without a role)."""
    return dict(_schema_roles())


def default_option_role() -> str:
    """The role of an encoding's option that declares none: the schema's `model.positional`'s."""
    return schema_roles()[POSITIONAL + "name"]


def option_role(encoding: str, option: str) -> str:
    """The role of one of an encoding's options: its `Options` field's own, else the schema's default."""
    options = ENCODING_OPTIONS[encoding]
    field = next((f for f in dataclasses.fields(options) if f.name == option), None)
    return (field.metadata.get("role") if field is not None else None) or default_option_role()


def role_of(key: str, encoding: Optional[str]) -> str:
    """The role of a dotted key of a run whose encoding is `encoding` (EXPERIMENT for an unknown key:
    it tells configurations apart and is fixed once a run starts)."""
    roles = schema_roles()
    if key in roles:
        return roles[key]
    if key.startswith(POSITIONAL) and encoding is not None:
        return option_role(encoding, key[len(POSITIONAL) :])
    return EXPERIMENT


def may_change(key: str, when: str, encoding: Optional[str]) -> bool:
    return ROLES[role_of(key, encoding)][WHEN[when]]


def changeable_keys(when: str, encoding: Optional[str] = None) -> list[str]:
    """The keys that may change `when` ('resume' or 'test'), a whole section as `section.*`."""
    roles = schema_roles()
    if encoding is not None:
        for f in dataclasses.fields(ENCODING_OPTIONS[encoding]):
            roles[POSITIONAL + f.name] = option_role(encoding, f.name)
    allowed = {k for k, r in roles.items() if ROLES[r][WHEN[when]]}
    out: list[str] = []
    for key in roles:
        section = key.split(".")[0] + "."
        if key in allowed:
            whole = all(k in allowed for k in roles if k.startswith(section))
            item = section + "*" if whole and "." in key else key
            if item not in out:
                out.append(item)
    return out


def hparam_keys() -> list[str]:
    return [key for key, info, _, _ in _fields() if info.get("hparam")]


def flag_settings() -> list[tuple[str, dict, Any]]:
    """(dotted key, what `setting` declared: its flags and help, type) of the keys that declare
    command-line flags, in schema order."""
    return [(key, info, tp) for key, info, _, tp in _fields() if info.get("flags")]


def configuration_settings(flat: dict, encoding: Optional[str]) -> dict:
    """A run's flattened config without the keys that do not tell configurations apart (seed,
    name, run_dir, where and how it ran)."""
    return {k: v for k, v in flat.items() if ROLES[role_of(k, encoding)][2]}


# ----------------------------------------------------------------------------- checks


def changes(old: dict, new: dict) -> dict[str, tuple]:
    """{dotted key: (old value, new value)} between two flattened configs."""
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def refused_on_resume(old: dict, new: dict, encoding: Optional[str]) -> tuple[dict, list[str], str]:
    """(changes, keys a resume may not change, the keys it may change as text) of flattened configs."""
    changed = changes(old, new)
    refused = [k for k in changed if not may_change(k, "resume", encoding)]
    return changed, refused, ", ".join(changeable_keys("resume", encoding))


def resume_changes(saved: dict, new: dict) -> dict[str, tuple]:
    """{key: (saved value, new value)} for the settings a resume changes (dicts as from `to_dict`);
    ConfigError naming every change a resume may not make (the keys' roles: above)."""
    from settings.config import flatten  # (config.py sits above this module)

    encoding = saved.get("model", {}).get("positional", {}).get("name")
    changed, refused, allowed = refused_on_resume(flatten(saved), flatten(new), encoding)
    if refused:
        details = "; ".join(f"{k}: {changed[k][0]!r} -> {changed[k][1]!r}" for k in refused)
        raise ConfigError(
            f"a resumed run keeps its experiment settings, but this resume changes {details}. "
            f"Start a new run for that (--set run_dir=<new folder>); a resume may change "
            f"only: {allowed}"
        )
    return changed
