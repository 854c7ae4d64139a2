"""Shared test setup: the repository root and tests/ on sys.path, one CPU thread for tiny models.

The tests sit in folders that mirror the code (tests/commands/, tests/training/, ...; the
guarantees kept through the real commands in tests/guarantees/, the layer rules in
tests/test_layers.py); docs/TESTS.md says what each costs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The project, and tests/ itself (helpers.py, in_process.py, ...) for the tests in its folders
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# The tests start the project's commands in several hundred subprocesses; where the environment turns
# Python's bytecode cache off (PYTHONDONTWRITEBYTECODE), each one compiled the project's modules again
# (about 0.7 s of a 3-4 s start). The suite keeps Python's default: the cache beside the sources
# (__pycache__/, ignored by git), written once and read by every later start.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# A shell without job control starts a background command (`make test &`, a CI step's script) with
# Ctrl-C ignored, and an ignored signal stays ignored in every process started after: the commands the
# tests stop with SIGINT would ignore it, and whether one did depended on which earlier test had left a
# handler in this worker. The suite runs as a terminal does: Ctrl-C handled (reset to its default at
# each command's exec), in the controller and in every worker.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items) -> None:
    """Test modules run longest first, by the seconds each took in a whole run (tests/durations.json,
    written by `make test-durations`); a module the table lacks (a new one) runs after them, and a
    module's own tests keep their order. Under pytest-xdist (`make test`: --dist loadfile
    --no-loadscope-reorder) each module goes whole to the next free worker, so the two workers end
    together: xdist's own order (most tests first) left a long module for last on one worker while the
    other had finished."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    seconds = json.loads((ROOT / "tests" / "durations.json").read_text())
    order = sorted(modules, key=lambda module: -seconds.get(module, 0.0))  # (stable: the rest as collected)
    items[:] = [item for module in order for item in modules[module]]
    if any(item.get_closest_marker("gpu") for item in items):
        import torch

        if not torch.cuda.is_available():  # the GPU tests run on a GPU machine: `make test-gpu`
            skip = pytest.mark.skip(reason="needs CUDA (make test-gpu on a GPU machine)")
            for item in items:
                if item.get_closest_marker("gpu"):
                    item.add_marker(skip)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)


@pytest.fixture(autouse=True)
def signals_left_as_found(request):
    """A test that leaves SIGINT, SIGTERM or SIGUSR2 ignored or blocked in this worker fails here:
    both pass to every command the worker starts after (a Python handler does not: exec resets it), and
    a later test that stops one would fail by chance, by which module ran first. Handlers a test left
    (an entry point's main_guard called in-process) are put back."""
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    ignored = [sig.name for sig in STOP_SIGNALS if signal.getsignal(sig) == signal.SIG_IGN != handlers[sig]]
    still_blocked = sorted(sig.name for sig in signal.pthread_sigmask(signal.SIG_SETMASK, blocked) - blocked)
    for sig in STOP_SIGNALS:
        if handlers[sig] is not None:
            signal.signal(sig, handlers[sig])
    assert not ignored and not still_blocked, (
        f"{request.node.nodeid} left {', '.join(ignored) or 'no signal'} ignored and "
        f"{', '.join(still_blocked) or 'no signal'} blocked in the pytest worker (the commands it starts inherit them)"
    )


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Tiny models run fastest single-threaded (and leave the other core to subprocess runs)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def trained_run_master(tmp_path_factory) -> Path:
    """A tiny RoPE run trained through train.py, in this process (tests/in_process.py), once per
    pytest process; tests use a copy of it (`trained_run`). It logs no TensorBoard images (nor do
    the resumes of its copies: rendering them costs a tiny run 2-5 s); tests/training/test_tensorboard_server.py
    trains its own run with them."""
    from helpers import tiny_overrides
    from in_process import run_in_process

    base = tmp_path_factory.mktemp("e2e-master")
    run_dir = base / "run"
    proc = run_in_process(["train.py", "--config", "configs/demo/rope.yaml", *tiny_overrides(run_dir, base / "cache")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def trained_run(trained_run_master: Path, tmp_path_factory) -> Path:
    """A copy of the tiny trained run (`trained_run_master`), one per test module that asks for it:
    a module's tests may write into it (test outputs, resumes) without reaching another module's."""
    run_dir = tmp_path_factory.mktemp("e2e") / "run"
    shutil.copytree(trained_run_master, run_dir)
    return run_dir


@pytest.fixture(scope="module")
def shipped_corpus() -> dict:
    """The shipped Tatoeba corpus, read and split as the demo configs do."""
    from data.readers import read_corpus
    from settings.config import DataConfig

    path = ROOT / "data" / "corpora" / "tatoeba-fr-en" / "fra-eng.tsv.gz"
    return read_corpus(DataConfig(source="tatoeba", path=str(path), valid_size=2000, test_size=2000))


@pytest.fixture(scope="session")
def trained_family_runs(tmp_path_factory) -> dict[str, Path]:
    """Tiny trained runs with a learned position table (learnable), a learned bias (t5_bias), a
    learned MLP bias (fire) and a decaying rotation (xpos), once per test process (the plots of
    tests/commands/test_visualize.py, the images of tests/training/test_tensorboard_log.py)."""
    from helpers import tiny_overrides
    from in_process import run_in_process

    base = tmp_path_factory.mktemp("families")
    runs = {}
    for name in ("learnable", "t5_bias", "fire", "xpos"):
        run_dir = base / name
        proc = run_in_process(
            [
                "train.py",
                "--config",
                "configs/demo/sinusoidal.yaml",
                *tiny_overrides(run_dir, base / "cache", images=True),
                "--set",
                f"model.positional.name={name}",
                *(["--set", "model.positional.max_positions=130"] if name == "learnable" else []),
            ]
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[name] = run_dir
    return runs
