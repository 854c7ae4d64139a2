"""What test.py is asked to score and where: its flags as one typed value, which `commands.test.run_test`
takes (from the command line, or from sweep.py's jobs) and `commands.test_folder` reads to place
the outputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from settings.config import Override, parse_override


@dataclass
class TestRequest:
    """What to score and where: test.py's flags, declared once."""

    run: Optional[str] = None
    config: Optional[str] = None
    model_path: Optional[str] = None
    overrides: Sequence[str | Override] = ()  # --set texts, parsed once here
    split: Optional[str] = None
    src: Optional[str] = None
    ref: Optional[str] = None
    concat: Optional[Sequence[int]] = None
    output: Optional[str] = None
    overwrite: bool = False
    device: Optional[str] = None  # None: the run's training.device (auto: CUDA when visible)
    concat_not_scored: Sequence[int] = ()  # the config's K above the test set's size (check_concat_fits)

    def __post_init__(self) -> None:
        self.overrides = [parse_override(o) for o in self.overrides]
        self.concat = None if self.concat is None else list(self.concat)
