"""What may change each config key, and when: read from the roles the schema declares
(`utils/config_schema.py`, `setting(role=...)`; an encoding's options in its `Options` dataclass).

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
import typing
from typing import Iterator, Optional

from utils.config_schema import EXPERIMENT, ROLES, ExperimentConfig, PositionalConfig
from utils.encoding_registry import registered_encodings

WHEN = {"resume": 0, "test": 1}  # index into ROLES' tuple
POSITIONAL = "model.positional."


def _fields(
    cls: type = ExperimentConfig, prefix: str = "", inherited: Optional[str] = None
) -> Iterator[tuple[str, dataclasses.Field, Optional[str], type]]:
    """(dotted key, field, role, type) of every key of the schema, sections unfolded (a section's role is
    inherited by keys that declare none); `model.positional` gives `name` only (options: `role_of`)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        role = f.metadata.get("role") or inherited
        tp = hints[f.name]
        if tp is PositionalConfig:
            yield from (item for item in _fields(tp, f"{prefix}{f.name}.", role) if item[0].endswith(".name"))
        elif dataclasses.is_dataclass(tp):
            yield from _fields(tp, f"{prefix}{f.name}.", role)
        else:
            yield f"{prefix}{f.name}", f, role, tp


@functools.lru_cache(maxsize=1)
def _schema_roles() -> tuple[tuple[str, Optional[str]], ...]:
    return tuple((key, role) for key, _, role, _ in _fields())  # the schema is fixed: walked once


def schema_roles() -> dict[str, Optional[str]]:
    """{dotted key: role} for every key of the schema (None would be a key without a role)."""
    return dict(_schema_roles())


def default_option_role() -> str:
    """The role of an encoding's option that declares none: the schema's `model.positional.options`."""
    options = next(f for f in dataclasses.fields(PositionalConfig) if f.name == "options")
    return options.metadata["role"]


def option_role(encoding: str, option: str) -> str:
    """The role of one of an encoding's options: its `Options` field's own, else the schema's default."""
    POSITIONAL_ENCODINGS = registered_encodings()
    options = POSITIONAL_ENCODINGS[encoding].Options
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
        POSITIONAL_ENCODINGS = registered_encodings()
        for f in dataclasses.fields(POSITIONAL_ENCODINGS[encoding].Options):
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
    return [key for key, f, _, _ in _fields() if f.metadata.get("hparam")]


def flag_settings() -> list[tuple[str, dataclasses.Field, type]]:
    """(dotted key, field, type) of the keys that declare command-line flags, in schema order."""
    return [(key, f, tp) for key, f, _, tp in _fields() if f.metadata.get("flags")]


def configuration_settings(flat: dict, encoding: Optional[str]) -> dict:
    """A run's flattened config without the keys that do not tell configurations apart (seed,
    name, run_dir, where and how it ran)."""
    return {k: v for k, v in flat.items() if ROLES[role_of(k, encoding)][2]}


# ----------------------------------------------------------------------------- checks


def changes(old: dict, new: dict) -> dict[str, tuple]:
    """{dotted key: (old value, new value)} between two flattened configs."""
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def _allowed(when: str, encoding: Optional[str]) -> str:
    return ", ".join(changeable_keys(when, encoding))


def refused_on_resume(old: dict, new: dict, encoding: Optional[str]) -> tuple[dict, list[str], str]:
    """(changes, keys a resume may not change, the keys it may change as text) of flattened configs."""
    changed = changes(old, new)
    return changed, [k for k in changed if not may_change(k, "resume", encoding)], _allowed("resume", encoding)


def test_time_refusal(refused: list[tuple[str, object, object]], encoding: Optional[str], checkpoint: str) -> str:
    """One line saying why testing a checkpoint with these changes [(key, trained value, asked
    value)] would score another model or other data than the one trained, and what may change."""
    why = []
    for key, was, now in refused:
        role = role_of(key, encoding)
        what = (
            "a training setting: it has no effect on a trained model"
            if role == "training"
            else "the seed the model was trained with"
            if role == "seed"
            else "part of what the model was trained with"
        )
        why.append(f"{key}={now!r} ({checkpoint} has {key}={was!r}; {what})")
    return (
        f"refused: {'; '.join(why)}. At test time only how the trained model is decoded and scored may "
        f"change: {_allowed('test', encoding)}. To score another model, train it (or pick its run with --run)"
    )


def roles_markdown() -> str:
    """The roles and their keys as a markdown table (the README's, generated by `make readme`)."""
    from utils.config_schema import ROLES

    by_role: dict[str, list[str]] = {}
    for key, role in schema_roles().items():
        by_role.setdefault(role, []).append(key)
    yes = {True: "yes", False: "no"}
    lines = [
        "| role | a resume may change it | test.py / inference.py `--set` may change it | tells configurations "
        "apart (compare.py) | keys |",
        "|---|---|---|---|---|",
    ]
    for role, (resume, test, groups) in ROLES.items():
        keys = by_role.get(role, [])
        sections = {k.split(".")[0] for k in keys if "." in k}
        shown = [
            f"`{s}.*`"
            for s in sorted(sections)
            if all(r == role for k, r in schema_roles().items() if k.startswith(s + "."))
        ]
        shown += [f"`{k}`" for k in keys if "." not in k or f"`{k.split('.')[0]}.*`" not in shown]
        lines.append(f"| {role} | {yes[resume]} | {yes[test]} | {yes[groups]} | {', '.join(shown)} |")
    return "\n".join(lines) + (
        f"\n\nAn encoding's options are {default_option_role()} keys unless its `Options` field declares "
        "another role (SHAPE's `inference_shift` is an inference key)."
    )
