"""train.py, test.py, inference.py and visualize.py: flags that name the
same thing twice are refused; the test-time device follows --device, else the run's
training.device; visualize.py's impossible values are one line before any work; a Ctrl-C is one
line and exit 4 (start-up, scoring, translating); a closed output pipe is quiet (141); a pipe given
as an input file (a shell's `<(...)`, a FIFO) is read. Each case goes through the entry script."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import CONFIG, ROOT, one_error_line, snapshot
from in_process import run_in_process as run

QUICK_TEST = ["--set", "evaluation.teacher_forced=false", "--concat", "1"]  # scoring without the diagnostics


@pytest.fixture(scope="module")
def model(trained_run: Path) -> dict[str, str]:
    """The module's copy of the tiny run, its best checkpoint, and a small test set (3 pairs)."""
    best = sorted((trained_run / "checkpoints").glob("best_*.pt"))[0]
    pairs = trained_run.parent / "pairs"
    pairs.mkdir()
    (pairs / "src.fr").write_text("Bonjour !\nJe t'aime.\nOù est la gare ?\n", encoding="utf-8")
    (pairs / "ref.en").write_text("Hello!\nI love you.\nWhere is the station?\n", encoding="utf-8")
    return {"run": str(trained_run), "best": str(best), "src": str(pairs / "src.fr"), "ref": str(pairs / "ref.en")}


# ---- 1. two flags naming one thing


DOUBLE_NAMES = [
    (["train.py", "--config", CONFIG, "--run", "{run}"], ("--config", "--run")),
    (["train.py", "--run", "{run}", "--overwrite"], ("--run", "--overwrite")),
    (["test.py", "--run", "{run}", "--model_path", "{best}"], ("--run", "--model_path")),
    (["test.py", "--run", "{run}", "--config", CONFIG], ("--run", "--config")),
    (["inference.py", "--run", "{run}", "--model_path", "{best}", "--src_text", "Salut"], ("--run", "--model_path")),
    (["inference.py", "--run", "{run}", "--config", CONFIG, "--src_text", "Salut"], ("--run", "--config")),
    (["inference.py", "--run", "{run}", "--src", "{src}", "--src_text", "Salut"], ("--src_text", "--src")),
    (["inference.py", "--run", "{run}", "--input", "{src}", "--src_text", "Salut"], ("--src_text", "--src")),
    (
        ["test.py", "--run", "{run}", "--concat", "2", "--set", "evaluation.concat=[4]"],
        ("--concat", "evaluation.concat"),
    ),
    (
        ["test.py", "--run", "{run}", "--concat", "2", "--set", "evaluation={{concat: [4]}}"],  # a whole section
        ("--concat", "evaluation.concat"),
    ),
    (
        ["inference.py", "--run", "{run}", "--src_text", "S", "--lenpen", "1", "--set", "decoding.alpha=0"],
        ("--lenpen", "alpha"),
    ),
    (
        ["inference.py", "--run", "{run}", "--src_text", "S", "--lenpen", "1", "--set", "decoding={{alpha: 0}}"],
        ("--lenpen", "alpha"),
    ),
    (
        ["visualize.py", "pe-heatmap", "--run", "{run}", "--model_path", "{best}", "--output", "{tmp}/x.png"],
        ("--run", "--model_path"),
    ),
    (
        ["visualize.py", "pe-similarity", "--run", "{run}", "--heads", "4", "--output", "{tmp}/x.png"],
        ("--heads", "--run"),
    ),
]


@pytest.mark.parametrize(
    "args, flags", DOUBLE_NAMES, ids=[f"{a[a[0] == 'visualize.py']} {' '.join(f)}" for a, f in DOUBLE_NAMES]
)
def test_two_flags_naming_one_thing_are_refused(args, flags, model, tmp_path: Path) -> None:
    before = snapshot(Path(model["run"]))
    line = one_error_line(run([a.format(**model, tmp=tmp_path) for a in args]))
    assert all(flag in line for flag in flags), line
    assert snapshot(Path(model["run"])) == before and not list(tmp_path.iterdir())


# ---- 2. the test-time device


@pytest.mark.parametrize("script", ["test.py", "inference.py"])
def test_the_runs_training_device_is_where_it_runs(script: str, model, tmp_path: Path) -> None:
    """No machine here has MPS: a run whose training.device says mps is refused, naming the key,
    rather than run on whatever auto finds (a sweep tested on any visible GPU)."""
    args = [script, "--run", model["run"], "--set", "training.device=mps"]
    args += ["--output", str(tmp_path / "out"), *QUICK_TEST] if script == "test.py" else ["--src_text", "Salut"]
    line = one_error_line(run(args))
    assert "training.device" in line and "mps" in line and model["run"] in line, line
    assert not (tmp_path / "out").exists()


def test_device_flag_wins_over_the_runs_training_device(model, tmp_path: Path) -> None:
    args = ["--run", model["run"], "--set", "training.device=mps", "--device", "cpu"]
    proc = run(["test.py", *args, "--src", model["src"], "--ref", model["ref"], "--output", str(tmp_path), *QUICK_TEST])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert " on cpu" in proc.stdout and (tmp_path / "scores.json").is_file()
    proc = run(["inference.py", *args, "--src_text", "Salut"])
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1, proc.stderr[-2000:]


# ---- 3. visualize.py: values a plot cannot be drawn from

VISUALIZE_MISUSE = [
    (["attention", "--run", "{run}", "--src_text", "   "], "--src_text"),
    (["attention", "--run", "{run}", "--src_text", "Salut", "--tgt_text", ""], "--tgt_text"),
    (["attention", "--run", "{run}", "--src_text", " ".join(["bonjour"] * 3000)], "at most 199"),
    (["pe-similarity", "--encoding", "rope", "--d_model", "30", "--heads", "2"], "--d_model 30"),
    (["pe-heatmap", "--positions", "0"], "--positions 0"),
    (["pe-heatmap", "--positions", "-5"], "--positions -5"),
    (["pe-heatmap", "--positions", str(10**12)], "--positions"),
    (["pe-similarity", "--position", "-1"], "--position -1"),
    (["pe-similarity", "--positions", "10", "--position", "10"], "--position 10"),
    (["pe-mds", "--positions", "1"], "--positions 1"),
    (["pe-similarity", "--encoding", "alibi", "--heads", "0"], "--heads 0"),
    (["pe-heatmap", "--d_model", "0"], "--d_model 0"),
    (["pe-heatmap", "--run", "no/such/run"], ".png"),  # x.foo: the format is checked before the model
]


@pytest.mark.parametrize("args, named", VISUALIZE_MISUSE, ids=[" ".join(a)[:50] for a, _ in VISUALIZE_MISUSE])
def test_visualize_refuses_what_it_cannot_plot(args, named: str, model, tmp_path: Path) -> None:
    out = tmp_path / ("plots" if args[0] == "attention" else "x.foo" if "no/such/run" in args else "x.png")
    line = one_error_line(run(["visualize.py", *[a.format(**model) for a in args], "--output", str(out)]))
    assert named in line and len(line) < 400, line
    assert not list(tmp_path.iterdir())


def test_visualize_names_an_unwritable_format_and_the_empty_output(tmp_path: Path) -> None:
    line = one_error_line(run(["visualize.py", "pe-heatmap", "--output", str(tmp_path / "x.foo")]))
    assert "x.foo" in line and ".png" in line and ".svg" in line, line
    assert "--output is empty" in one_error_line(run(["visualize.py", "pe-heatmap", "--output", ""]))
    assert not list(tmp_path.iterdir())


# ---- 4. Ctrl-C: one line, exit 4, nothing partial


def start(args: list[str], buffered: bool = False, **popen) -> subprocess.Popen:
    """`python *args` taking SIGINT as a terminal's Ctrl-C would, even where the suite runs with SIGINT
    ignored (a background job: children inherit that, and Python then installs no handler)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a handled signal is reset at exec
    try:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        if buffered:
            env.pop("PYTHONUNBUFFERED", None)
        return subprocess.Popen([sys.executable, *args], cwd=ROOT, text=True, env=env, **popen)
    finally:
        signal.signal(signal.SIGINT, previous)


def wait_for_line(proc: subprocess.Popen, text: str, seconds: float = 120) -> list[str]:
    """Read `proc`'s stdout (on a thread: readline blocks) until a line holding `text`; the list of
    its lines, which the thread keeps filling until the process ends."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if text in line:
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    assert seen.wait(seconds), f"never printed {text!r}: {''.join(lines)[-2000:]}"
    return lines


def interrupted(proc: subprocess.Popen, sig: int = signal.SIGINT) -> str:
    """Send `sig`; its stderr after asserting exit 4 and no traceback (killed after 120 s)."""
    proc.send_signal(sig)
    killer = threading.Timer(120, proc.kill)
    killer.start()
    try:
        err = proc.stderr.read()
        proc.wait()
    finally:
        killer.cancel()
    assert proc.returncode == 4 and "Traceback" not in err, (proc.returncode, err[-3000:])
    return err


@pytest.mark.slow  # a process of its own, sent a signal or a closed pipe
def test_ctrl_c_while_train_starts_is_one_line(tmp_path: Path) -> None:
    """Before train.py's own handlers exist (torch still loading): main_guard's one line."""
    proc = start(["train.py", "--config", CONFIG, "--set", f"run_dir={tmp_path / 'run'}"], stderr=subprocess.PIPE)
    maps, deadline = Path(f"/proc/{proc.pid}/maps"), time.time() + 60
    while "libtorch" not in maps.read_text():  # torch loads only inside main_guard (the command's lazy import)
        assert time.time() < deadline and proc.poll() is None, "torch never loaded"
        time.sleep(0.01)
    err = interrupted(proc)
    assert (
        [line for line in err.splitlines() if line.strip()]
        == [line for line in err.splitlines() if line.startswith("interrupted: stopped before finishing")]
        != []
    ), err


@pytest.mark.slow  # a process of its own, sent a signal or a closed pipe
def test_ctrl_c_while_training_saves_and_says_so(model, tmp_path: Path) -> None:
    """After start-up train.py's own handler stops after the step, checkpoints and says how to continue.
    It trains a copy: the module's run stays as trained, whatever order the tests run in."""
    run_dir, before = tmp_path / "run", snapshot(Path(model["run"]))
    shutil.copytree(model["run"], run_dir)
    args = ["train.py", "--run", str(run_dir), "--set", "training.max_steps=100000"]
    proc = start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = wait_for_line(proc, "step 8 ")
    err = interrupted(proc)
    assert "interrupted:" not in err and "error:" not in err, err
    assert any(line.startswith("received signal 2: stopping after this step") for line in lines), lines
    last = max(int(p.stem.split("_")[-1]) for p in (run_dir / "checkpoints").glob("last_checkpoint_*.pt"))
    assert last >= 8
    assert snapshot(Path(model["run"])) == before  # the module's run, which the other tests use


@pytest.mark.slow  # a process of its own, sent a signal or a closed pipe
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_while_scoring_leaves_nothing_partial(sig, model, tmp_path: Path) -> None:
    """A Ctrl-C, or a SIGTERM (`kill`, a scheduler: main_guard's stop_on_sigterm), stops test.py in one
    line; nothing partial is left and the run lock is released (no .lock.pid naming a dead process)."""
    out = tmp_path / "scores"
    args = ["test.py", "--run", model["run"], "--output", str(out), "--concat", "1", "2", "4", "8"]
    proc = start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_line(proc, "scoring ")
    err = interrupted(proc, sig)
    assert "interrupted: stopped before finishing" in err and "error:" not in err, err
    assert not (out / ".lock.pid").exists()
    left = sorted(p.name for p in out.rglob("*") if p.name not in (".lock", ".lock.pid")) if out.exists() else []
    assert "scores.json" not in left and not [n for n in left if "tmp" in n or n.startswith(".")], left


@pytest.mark.slow  # a process of its own, sent a signal or a closed pipe
def test_ctrl_c_while_translating_is_one_line(model) -> None:
    proc = start(
        ["inference.py", "--run", model["run"], "--interactive"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdin.write("Bonjour !\n")
    proc.stdin.flush()
    assert proc.stdout.readline()  # translated; now waiting for the next line
    err = interrupted(proc)
    assert [line for line in err.splitlines() if line.strip()][-1].startswith("interrupted: "), err


# ---- 5. a reader that went away


@pytest.mark.slow  # a process of its own, sent a signal or a closed pipe
@pytest.mark.parametrize("script", ["inference.py", "visualize.py", "test.py"])
def test_a_closed_output_pipe_is_quiet(script: str, model, tmp_path: Path) -> None:
    """`SCRIPT ... | head -0`: the reader is gone before the first line is written; block-buffered
    stdout as in a shell (no PYTHONUNBUFFERED), so the last lines are flushed only at the end."""
    args = {
        "inference.py": ["--run", model["run"], "--src_text", *["Bonjour !"] * 50],
        "visualize.py": ["pe-heatmap", "--positions", "8", "--output", str(tmp_path / "x.png")],
        "test.py": ["--run", model["run"], "--src", model["src"], "--ref", model["ref"], "--output", str(tmp_path)],
    }[script]
    proc = start(
        [script, *args, *(QUICK_TEST if script == "test.py" else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        buffered=True,
    )
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err == "", (proc.returncode, err[-3000:])


# ---- 6. a pipe as an input file


def fifo_of(tmp_path: Path, name: str, text: str) -> str:
    """A named pipe that `text` is written into once a reader opens it (as `<(printf ...)` gives)."""
    path = tmp_path / name
    os.mkfifo(path)

    def feed() -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    threading.Thread(target=feed, daemon=True).start()
    return str(path)


def test_inference_reads_a_process_substitution(model) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, "Bonjour !\nJe t'aime.\n".encode())
    os.close(write_end)
    try:
        proc = run(["inference.py", "--run", model["run"], "--src", f"/dev/fd/{read_end}"])
    finally:
        os.close(read_end)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2, proc.stderr[-2000:]


def test_test_py_reads_named_pipes(model, tmp_path: Path) -> None:
    src = fifo_of(tmp_path, "src.fr", Path(model["src"]).read_text(encoding="utf-8"))
    ref = fifo_of(tmp_path, "ref.en", Path(model["ref"]).read_text(encoding="utf-8"))
    out = tmp_path / "out"
    proc = run(["test.py", "--run", model["run"], "--src", src, "--ref", ref, "--output", str(out), *QUICK_TEST])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len((out / "hypotheses.txt").read_text(encoding="utf-8").splitlines()) == 3


def test_pipes_that_disagree_are_named_as_given(model, tmp_path: Path) -> None:
    """The pipes are read through temporary copies; the error names the user's --src / --ref."""
    src = fifo_of(tmp_path, "src.fr", "Bonjour !\nJe t'aime.\n")
    ref = fifo_of(tmp_path, "ref.en", "Hello!\n")
    out = tmp_path / "out"
    line = one_error_line(run(["test.py", "--run", model["run"], "--src", src, "--ref", ref, "--output", str(out)]))
    assert src in line and ref in line and "test-inputs-" not in line, line
    assert not out.exists()


def test_a_missing_input_names_its_flag(model, tmp_path: Path) -> None:
    line = one_error_line(run(["inference.py", "--run", model["run"], "--src", str(tmp_path / "none.fr")]))
    assert f"--src {tmp_path / 'none.fr'}: file not found" in line, line
