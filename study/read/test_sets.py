"""The test sets a family's claim is about (issue 78; `test_sets:` in configs/<study>/findings/headline.yaml):
the configurations' own test split (a name alone: identified, as every run's test is, by its data
report) and file pairs of other domains (a name, the source and reference files relative to the
project, and the sha256 of both sides, so that a changed file cannot pass as the declared one). A
family without `test_sets` is about its own split alone, as before. Read with the family
(study/read/family.py), which checks the files where it reads them from disk."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True)
SetName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]  # a folder name's part: test_set_<name>/
SET_FOLDER = "test_set_{}"  # a declared file pair's test in a run: <run>/test_set_<name>/ (sweep.py --family)
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
SHAPE = (
    "test_sets[{i}] must be {{name: ..., src: ..., ref: ..., sha256: {{src: ..., ref: ...}}}} (a name alone: "
    "the configurations' own test split; names: lowercase letters, digits and _, at most 32), got {value!r}"
)

FIELDS = {  # a bad value of one key of test_sets[i]: its own line, naming the key and what it takes
    "name": "test_sets[{i}].name must be lowercase letters, digits and _, a letter first, at most 32 (its "
    "folder is test_set_<name>/), got {value!r}",
    "src": "test_sets[{i}].src must be a file path relative to the project, got {value!r}",
    "ref": "test_sets[{i}].ref must be a file path relative to the project, got {value!r}",
    "sha256": "test_sets[{i}].sha256 must be {{src: ..., ref: ...}}, each the 64 lowercase hex digits `sha256sum` "
    "prints for that file, got {value!r}",
    "max_source_tokens": "test_sets[{i}].max_source_tokens must be a whole number of subword tokens, at least 1 "
    "(leave it out to score every source), got {value!r}",
}


def refusal(i: object, key: object, entry: object) -> str:
    """The line refusing test_sets[i] as written (`entry`), where pydantic found its `key` bad (None: the
    entry itself): that key's own line, else the shape of an entry."""
    if key in FIELDS and isinstance(entry, dict) and key in entry:
        return FIELDS[key].format(i=i, value=entry[key])
    return SHAPE.format(i=i, value=entry)


class Sides(BaseModel):
    """The sha256 of a pair's source and reference files (`sha256sum` of each, as bytes)."""

    model_config = FROZEN
    src: Sha256
    ref: Sha256


class TestSet(BaseModel):
    """One declared test set: the own split (`name` alone) or a file pair with its hashes; `max_source_tokens`
    is a declared length rule (sources of at most N subword tokens are scored)."""

    __test__ = False  # (not a pytest class)
    model_config = FROZEN
    name: SetName
    src: Optional[str] = None
    ref: Optional[str] = None
    sha256: Optional[Sides] = None
    max_source_tokens: Optional[Annotated[int, Field(ge=1)]] = None

    @model_validator(mode="after")
    def _pair(self) -> TestSet:
        given = [key for key in ("src", "ref", "sha256") if getattr(self, key) is not None]
        if given and len(given) != 3:
            missing = sorted({"src", "ref", "sha256"} - set(given))
            raise PydanticCustomError(
                "test_set",
                "test set '{name}' gives {given} but not {missing}: a file pair needs src, ref and sha256",
                {"name": self.name, "given": ", ".join(given), "missing": ", ".join(missing)},
            )
        return self

    @property
    def own(self) -> bool:
        """Whether this is the configurations' own test split (no files of its own)."""
        return self.src is None

    @property
    def folder(self) -> str:
        return SET_FOLDER.format(self.name)


def held_sides(held: object) -> tuple[Optional[str], Optional[str]]:
    """The (src, ref) sha256 a scores.json `test_set` records of the files it scored (None where it holds none):
    how a test of a declared file pair is known, by sweep.py before it tests and by compare.py before it reads."""
    sides = held.get("sha256") if isinstance(held, dict) else None
    return (sides.get("src"), sides.get("ref")) if isinstance(sides, dict) else (None, None)


def other_sides(held: object, declared: tuple[str, str], paths: tuple[str, str]) -> str:
    """Which side(s) of a test of other files differ from the declared set (`declared`: its (src, ref) sha256,
    `paths`: its files), each with the file it scored and both sha256, for the line that refuses it."""
    named = held if isinstance(held, dict) else {}
    return "; ".join(
        f"its {side} {named.get(side) or 'file'} has sha256 {(got or 'none')[:12]}…, the declared {path} {want[:12]}…"
        for side, got, want, path in zip(("src", "ref"), held_sides(held), declared, paths)
        if got != want
    )


def check_names(sets: tuple[TestSet, ...]) -> Optional[str]:
    """Why the declared sets cannot stand together (two of one name, two own splits), or None."""
    names = [s.name for s in sets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        return f"test_sets names {', '.join(twice)} twice: each set needs a name of its own"
    if sum(s.own for s in sets) > 1:
        return "test_sets names the own test split twice (a name alone): give the other one its src, ref and sha256"
    return None


def file_changes(sets: tuple[TestSet, ...], root: Path) -> Optional[str]:
    """The first declared file that is missing or whose sha256 is not the declared one, as one line."""
    for s in sets:
        if s.own:
            continue
        for side in ("src", "ref"):
            path, want = root / getattr(s, side), getattr(s.sha256, side)
            if not path.is_file():
                where = getattr(s, side)
                return (
                    f"test set {s.name!r}: its {side} file {where} does not exist (paths are relative to the project)"
                )
            got = hashlib.sha256(path.read_bytes()).hexdigest()
            if got != want:
                return (
                    f"test set {s.name!r}: {getattr(s, side)} has sha256 {got[:12]}…, the family {want[:12]}…: "
                    "the file changed since the family was declared; restore it (git checkout) or declare a new family"
                )
    return None
