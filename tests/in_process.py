"""Run an entry script (train.py, test.py, inference.py, ...) inside the test process, as
`python SCRIPT ARGS` would run it, without paying a new interpreter and the torch import.

`run_in_process(args, cwd)` is a drop-in for `helpers.run(args, cwd)` (no stdin): it loads the
script from its file (once per script), runs `main_guard(main)` exactly as the script's
`if __name__ == "__main__": raise SystemExit(main_guard(main))` does, with argv, cwd and the
environment that `helpers.run` gives a subprocess, and returns a `subprocess.CompletedProcess`
with the exit code and what the run printed on stdout and stderr:

- `main_guard`'s one-line errors and exit codes (2, 3, 4) come back as they are;
- a SystemExit (argparse's usage errors, exit 2) gives its code, as the interpreter would;
- any other exception is rendered as the interpreter renders an uncaught one: its traceback in
  stderr, exit code 1 (so "no Traceback in stderr" still catches a crash);
- warnings go to the captured stderr under a fresh interpreter's default filters (not to pytest's
  warning summary, and not under pytest's own filters);
- stdin is empty (as /dev/null, what pytest gives a subprocess).

Process-wide state a run changes is put back afterwards: sys.argv, sys.stdin/stdout/stderr, the
working directory, the environment variables set here, signal handlers (train.py installs
SIGINT/SIGTERM handlers), torch's thread count, the random generators (python, numpy, torch),
warning filters, and logging stream handlers (pointed at the captured streams during the run).
What cannot be put back is not covered: a test that needs a signal, a killed process, a second
process holding a lock, stdin, or torchrun keeps `helpers.run` (a real subprocess).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import random
import signal
import subprocess
import sys
import traceback
import warnings
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]

# The variables tests/helpers.py run() adds to a subprocess's environment.
SUBPROCESS_ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}

# A fresh interpreter's warning filters (Python 3.11, no -W / PYTHONWARNINGS), first match wins.
_DEFAULT_WARNING_FILTERS = [
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
]

_SCRIPTS: dict[Path, ModuleType] = {}


def load_script(path: Path) -> ModuleType:
    """The entry script at `path` as a module (not as `__main__`, so its main guard does not run),
    loaded once per file. Loaded from the file itself: `import test` would name Python's own test
    package (sweep.py calls commands.test.run_test instead)."""
    path = path.resolve()
    if path not in _SCRIPTS:
        if str(path.parent) not in sys.path:  # `python SCRIPT` puts the script's folder on sys.path
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(f"_entry_script_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # a failure is not cached: the next call tries again
        _SCRIPTS[path] = module
    return _SCRIPTS[path]


def _exit_code(code) -> tuple[int, str]:
    """The process exit status and stderr text of `raise SystemExit(code)`, as the interpreter gives them."""
    if code is None:
        return 0, ""
    if isinstance(code, int):  # (bool included)
        return int(code) & 0xFF, ""
    return 1, f"{code}\n"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _working_directory(cwd: Path):
    before = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _fresh_warnings():
    with warnings.catch_warnings():  # restores filters and showwarning afterwards
        warnings.resetwarnings()
        for action, category, module in reversed(_DEFAULT_WARNING_FILTERS):
            warnings.filterwarnings(action, category=category, module=module)
        warnings.showwarning = _show_warning
        yield


@contextlib.contextmanager
def _signal_handlers():
    saved = {}
    for sig in signal.valid_signals():
        try:
            saved[sig] = signal.getsignal(sig)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


@contextlib.contextmanager
def _torch_state():
    import torch

    threads = torch.get_num_threads()
    states = [random.getstate(), torch.get_rng_state()]
    try:
        import numpy as np

        states.append(np.random.get_state())
    except ImportError:
        np = None
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        random.setstate(states[0])
        torch.set_rng_state(states[1])
        if np is not None:
            np.random.set_state(states[2])


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers = [logging.getLogger()] + [
        x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger)
    ]
    return [
        h
        for lg in loggers
        for h in lg.handlers  # (a `stream` property, e.g. logging's last resort,
        if isinstance(h, logging.StreamHandler)
        and not isinstance(h, logging.FileHandler)  # follows sys.stderr)
        and not isinstance(getattr(type(h), "stream", None), property)
    ]


@contextlib.contextmanager
def _logging_streams(console_out, console_err, out: io.StringIO, err: io.StringIO):
    """Logging handlers that write to the console write to the captured streams during the run
    (a subprocess's handlers would write to its stdout/stderr); afterwards every handler pointed at
    a captured stream (also one created during the run) points at the console stream again."""
    captured = {id(console_out): out, id(console_err): err, id(sys.__stdout__): out, id(sys.__stderr__): err}
    moved = []
    for h in _stream_handlers():
        if id(h.stream) in captured:
            moved.append((h, h.stream))
            h.setStream(captured[id(h.stream)])
    try:
        yield
    finally:
        for h, stream in moved:
            h.setStream(stream)
        for h in _stream_handlers():
            if h.stream is out or h.stream is err:
                h.setStream(console_out if h.stream is out else console_err)


def run_in_process(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python *args` in cwd, run in this process: CompletedProcess(args, returncode, stdout, stderr).
    `args[0]` is the script (relative to cwd, or absolute), the rest its arguments."""
    cwd = Path(cwd).resolve()
    script = Path(args[0]) if Path(args[0]).is_absolute() else cwd / args[0]
    if not script.is_file():  # as the interpreter answers
        return subprocess.CompletedProcess(
            [sys.executable, *map(str, args)],
            2,
            "",
            f"{sys.executable}: can't open file {str(script.absolute())!r}: [Errno 2] No such file or directory\n",
        )
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    saved_argv, saved_stdin, console_out, console_err = sys.argv, sys.stdin, sys.stdout, sys.stderr
    sys.argv, sys.stdin = [str(args[0]), *map(str, args[1:])], stdin
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_working_directory(cwd))
            stack.enter_context(_environment(SUBPROCESS_ENV))
            stack.enter_context(_signal_handlers())
            stack.enter_context(_torch_state())
            stack.enter_context(contextlib.redirect_stdout(out))
            stack.enter_context(contextlib.redirect_stderr(err))
            stack.enter_context(_logging_streams(console_out, console_err, out, err))
            stack.enter_context(_fresh_warnings())
            try:
                module = load_script(script)
                raise SystemExit(module.main_guard(module.main))
            except SystemExit as e:
                returncode, text = _exit_code(e.code)
                err.write(text)
            except Exception:  # noqa: BLE001 - what the interpreter does with an uncaught exception
                err.write(traceback.format_exc())
                returncode = 1
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        sys.argv, sys.stdin = saved_argv, saved_stdin
    return subprocess.CompletedProcess([sys.executable, *map(str, args)], returncode, out.getvalue(), err.getvalue())
