"""What a publication's journal (utils/publish.py) names, and how it is followed where it now is: a
journal travels with its folder (issue 75).

The rule: a journal names every file it moves or drops relative to its own folder (the folder of the
set's place, where the journal and the staging folder lie), and records that folder's resolved path.
- where it was written (the recorded folder is where it is now): followed as written;
- in a folder moved or copied since: followed where it is now, its relative names taken from there,
  so a moved folder's publication is finished in place and a copy's in the copy, never in the
  original; an entry that leads outside the folder (a link's resolved target elsewhere, which
  compare.py writes through, a `..`, a folder linked out) is not followed: the journal is refused in
  one line, since finishing the rest would leave a mix;
- a journal of an earlier version (absolute names, or names relative to the command's working folder):
  followed only when every name lies inside the folder it is now in, else refused the same way;
- a journal without its staging folder (moved without it: a finisher deletes the journal before the
  staging folder, never after) is refused: its moves are lost, and finishing would leave a mix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from utils.errors import HarnessError

FORMAT = 2  # names relative to the journal's folder (an earlier journal has no "format")

Plan = tuple[list[tuple[Path, Path]], list[Path]]  # (staged file, its place) for each move; the drops


def journal_text(folder: Path, moves: list[tuple[Path, Path]], drops: list[Path]) -> str:
    """The journal of a publication in `folder`: each path relative to it (a path outside, a link's
    resolved target, as it is: followed only where the journal was written)."""
    bases = (folder, folder.absolute(), folder.resolve())

    def name(path: Path) -> str:
        inside = next((base for base in bases if path.is_relative_to(base)), None)
        return path.relative_to(inside).as_posix() if inside is not None else str(path.absolute())

    plan = {
        "format": FORMAT,
        "folder": str(folder.resolve()),
        "moves": [[name(staged), name(target)] for staged, target in moves],
        "removes": sorted(name(p) for p in drops),
    }
    return json.dumps(plan, indent=1) + "\n"


def read_plan(journal: Path, staging: Path, writer: str) -> Optional[Plan]:
    """The moves and drops of `journal` as paths where it now is; None when it is damaged (atomic
    writes never leave one: not ours to follow); HarnessError, naming it and the fix, when it cannot
    be finished here (the module's rule). FileNotFoundError when there is none."""
    try:
        plan = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        if isinstance(e, (FileNotFoundError, NotADirectoryError)):
            raise FileNotFoundError(journal) from None
        return None
    entries = plan.get("moves") if isinstance(plan, dict) else None
    if not (isinstance(entries, list) and isinstance(plan.get("removes"), list)):
        return None
    if not all(isinstance(m, list) and len(m) == 2 for m in entries):
        return None
    names = [n for m in entries for n in m] + plan["removes"]
    if not all(isinstance(n, str) and n for n in names):
        return None
    folder = journal.parent
    here = folder.resolve()
    earlier = plan.get("format") != FORMAT  # absolute names, or relative to the writer's working folder
    begun_here = not earlier and plan.get("folder") == str(here)

    def place(name: str) -> Path:
        path = Path(name) if earlier or Path(name).is_absolute() else folder / name
        if not (begun_here or inside(path, here)):
            raise HarnessError(refusal(journal, staging, writer, path, plan.get("folder") if not earlier else None))
        return path

    moves = [(place(staged), place(target)) for staged, target in entries]
    removes = [place(p) for p in plan["removes"]]
    if moves and not staging.is_dir():
        raise HarnessError(
            f"{journal} lists files to publish from {staging}, which is not there (the folder was moved or copied "
            f"without it?): it is not followed, since what it would publish is lost. Put {staging.name} back beside "
            f"it, or delete {journal} and run {writer} again"
        )
    return moves, removes


def inside(path: Path, here: Path) -> bool:
    """Whether `path` lies in the folder `here` (resolved), through any link on the way to it (the
    last name itself is replaced or removed, never followed)."""
    if path.name in ("", ".", ".."):
        return False
    return Path(os.path.realpath(path.parent)).joinpath(path.name).is_relative_to(here)


def refusal(journal: Path, staging: Path, writer: str, path: Path, begun_in: Optional[str]) -> str:
    if begun_in is not None:
        why = f"it was begun in {begun_in} and names {path}, outside {journal.parent}, where it is now"
    else:
        why = f"it was written by an earlier version of the harness and names {path}, outside {journal.parent}"
    return (
        f"{journal} is a publication a stopped {writer} left unfinished, and {why} (a folder moved or copied since): "
        f"it is not followed outside its folder. Finish it where it was begun (move the folder back, run {writer} "
        f"again there), or delete {journal} and {staging.name} beside it and run {writer} again"
    )
