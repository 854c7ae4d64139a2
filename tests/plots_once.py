"""Plots rendered once per input in the crash tests' forked commands (tests/guarantees/
test_crash_consistency.py): a plot's bytes depend only on the runs compared, and its rendering
(matplotlib, about nine tenths of a tiny compare.py) is not what a kill at a write point tests. The
first call on some runs renders and keeps its plots; every later call on the same runs writes those
bytes, each file through the same whole-or-nothing write (utils/files.atomic_output) as the real
renderer, so a call passes exactly the same write points and publishes the same set."""

from __future__ import annotations

import atexit
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

_CACHE: Optional[Path] = None  # made in the test process, shared by its forks


def cache() -> Path:
    """The session's folder of rendered plots: asked for in the test process, before it forks."""
    global _CACHE
    if _CACHE is None:
        _CACHE = Path(tempfile.mkdtemp(prefix="plots-once-"))
        atexit.register(shutil.rmtree, _CACHE, True)
    return _CACHE


def once(render: Callable, cache: Path) -> Callable:
    """`render` (study.pages.comparison_plots.write_plots) rendering each input's plots once."""
    from study.pages.comparison_plots import PLOT_SUFFIXES
    from utils.files import atomic_output

    def write_plots(groups, prefix: Path) -> list[Path]:
        kept = cache / hashlib.sha256(repr(groups).encode()).hexdigest()
        if not kept.is_dir():
            written = render(groups, prefix)
            staged = Path(tempfile.mkdtemp(dir=cache))
            for path in written:
                shutil.copyfile(path, staged / path.name[len(prefix.name) :])
            try:
                staged.rename(kept)
            except OSError:  # another fork kept the same bytes first
                shutil.rmtree(staged, ignore_errors=True)
            return written
        written = []
        for suffix in PLOT_SUFFIXES:  # (the renderer's order)
            if (kept / suffix).is_file():
                path = prefix.with_name(prefix.name + suffix)
                with atomic_output(path, "wb", encoding=None) as f:
                    f.write((kept / suffix).read_bytes())
                written.append(path)
        return written

    return write_plots


def render_plots_once(kept: Path) -> None:
    """In a forked child: every module's `write_plots` (compare.py's recipe, wherever it imports it
    from) replaced by one that renders each input's plots once per test session."""
    import commands.compare  # noqa: F401  (loads every module of its recipe)
    from study.pages import comparison_plots

    real = comparison_plots.write_plots
    cached = once(real, kept)
    for module in list(sys.modules.values()):
        if getattr(module, "write_plots", None) is real:
            module.write_plots = cached
