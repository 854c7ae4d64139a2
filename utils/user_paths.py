"""Paths as a user typed them: a local path or a hub id, and a `~` the shell did not expand.
Checks of the text alone, below every module that writes or reads (utils/files.py, utils/run_folder.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from utils.errors import WriteError


def looks_like_a_path(name: str) -> bool:
    """A name (tokenizer.name, data.hf_name) that can only be a local path, not a Hugging Face hub
    id ('org/name'): absolute, relative to here or home, or with more than one '/'."""
    return Path(name).is_absolute() or name.startswith((".", "~")) or name.count("/") > 1


def check_home_expanded(path: str | Path, what: str) -> None:
    """A path with a `~` the shell left as it is (`--output=~/x`: no expansion after `=`, or quoted;
    `--set run_dir=~/x`) would create a folder named `~` here, not write into the home folder. A `~`
    folder that exists is the user's own and is taken as it is."""
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if part.startswith("~") and os.path.expanduser(part) != part and not Path(*parts[: i + 1]).exists():
            meant = Path(os.path.expanduser(part), *parts[i + 1 :])
            raise WriteError(
                f"{what} {path} has {part!r}, which the shell did not expand (it does not after '=' "
                f"or in quotes): it names a folder {part!r} here, not a home folder; write {meant} instead"
            )
