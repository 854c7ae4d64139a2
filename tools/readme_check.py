#!/usr/bin/env python
"""Run every command the README shows, for real, in a scratch copy of the project whose configs are
tiny ones of the same names (`make readme-check`).

Which commands, and which pages beside the README (the docs pages its detail moved to): tools/readme_commands.py.

How each one is checked:
  - run: in README order, in one scratch copy (`git ls-files` of the working tree, untracked files
    included), with `python` the project's virtual environment; it must exit 0 (a console block:
    print the lines shown). A command shown twice runs once. `tensorboard` is started on a free
    port and must serve the runs, then it is stopped. The sections in ISOLATED run in a copy of
    their own (`make demo` trains the runs that the walk-through trains by hand).
  - parsed only: a command marked "(needs a GPU)" (or a SLURM cluster, several nodes) and the checks
    in CHECKS, which are their own runs. Its arguments go through the script's own argparse parser (torchrun's
    first, for a torchrun line); a `make` line through `make -n`, and every `python X.py` line
    that make would run through X.py's parser; a `pip install torch==V` line must pin the
    `requirements.txt` version.
  - every command: no deprecated flag spelling (the one-line note of commands/cli.py).

The tiny configs: every config under configs/ (findings/ excepted) gets TINY's values, a file with
a `base:` only for the keys it sets itself: a few hundred training pairs, 10 test pairs, a 1+1
layer model of width 32, 6 steps. An archived run folder a command reads (results/demo/sinusoidal)
is replaced by a tiny run of its config and seed, trained and tested first.

  python tools/readme_check.py               # the whole check (several minutes on 2 CPU cores)
  python tools/readme_check.py --parse-only  # every command parsed only, nothing run (seconds)
  python tools/readme_check.py --list        # the commands and how each would be checked
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(1, str(ROOT))  # (utils/run_files.py: the run folder's file names, a module without imports)
from readme_commands import Command, page_commands  # noqa: E402

from utils import run_files  # noqa: E402

VENV = ROOT / ".venv"

ISOLATED = ("The two commands",)
TINY = {
    "data": {"max_train_pairs": 400, "valid_size": 12, "test_size": 16},  # 16: the largest K a README command joins
    "tokenizer": {"vocab_size": 400},
    "model": {"d_model": 32, "num_heads": 4, "ffn_dim": 64, "num_encoder_layers": 1, "num_decoder_layers": 1},
    "training": {
        "max_steps": 6,
        "validate_every_steps": 3,
        "max_tokens": 300,
        "bleu_sentences": 4,
        "log_every": 2,
        "num_threads": 1,
    },
    "decoding": {"beam_size": 2, "max_len_a": 1.0, "max_len_b": 5},
}
DEPRECATED = re.compile(r"note: \S+ is deprecated")
TIMEOUT = 900


# ---- the scratch copy


def _merge_tiny(data: dict, only_set: bool) -> dict:
    for section, values in TINY.items():
        if only_set and not isinstance(data.get(section), dict):
            continue
        target = data.setdefault(section, {})
        for key, value in values.items():
            if not only_set or key in target:
                target[key] = value
    return data


def tiny_configs(scratch: Path) -> None:
    import yaml

    for path in sorted((scratch / "configs").rglob("*.yaml")):
        if "findings" in path.parts:
            continue
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        path.write_text(yaml.safe_dump(_merge_tiny(data, only_set="base" in data), sort_keys=False), encoding="utf-8")


def make_scratch(dest: Path) -> Path:
    """A copy of the working tree (tracked and untracked files, not the ignored ones), tiny configs,
    the project's virtual environment linked in (make sees it installed)."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".venv").symlink_to(VENV)
    os.utime(dest / "requirements.txt", (0, 0))  # older than .venv/.installed: make installs nothing
    tiny_configs(dest)
    return dest


def env() -> dict:
    return {
        **os.environ,
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        "MAKEFLAGS": "",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def stand_ins(cmds: list[Command], scratch: Path, log) -> None:
    """Replace each archived run folder a running command reads by a tiny run of its config and seed."""
    import yaml

    folders = sorted(
        {
            m
            for c in cmds
            if not c.parse_only
            for m in re.findall(r"results/(?:report/)?[a-z]+/\w+", c.text)
            if (ROOT / m / run_files.CONFIG).is_file()
        }
    )
    for folder in folders:
        archived = yaml.safe_load((ROOT / folder / run_files.CONFIG).read_text(encoding="utf-8"))
        shutil.rmtree(scratch / folder)
        for cmd in (
            f"python train.py --config configs/{archived['name']}.yaml --set seed={archived['seed']} "
            f"--set run_dir={folder}",
            f"python test.py --run {folder}",
        ):
            proc = subprocess.run(
                ["bash", "-c", cmd],
                cwd=scratch,
                env=env(),
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=TIMEOUT,
            )
            if proc.returncode != 0:
                raise SystemExit(f"error: the stand-in for {folder} failed: {cmd}\n{proc.stderr[-2000:]}")
        log(f"stand-in: {folder} is a tiny run of configs/{archived['name']}.yaml (seed {archived['seed']})")


# ---- parsing a command's arguments without running it


class _Parsed(BaseException):
    pass


def parse_scripts(argvs: list[list[str]]) -> list[tuple[bool, str]]:
    """Parse each `script.py args...` with the script's own parser, in this process, running nothing:
    (accepted, what it said) for each."""
    import argparse
    import io
    import runpy

    original = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed

    argparse.ArgumentParser.parse_args = parse_and_stop
    sys.path.insert(0, os.getcwd())
    results = []
    for argv in argvs:
        said = io.StringIO()
        sys.argv = list(argv)
        try:
            with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                runpy.run_path(argv[0], run_name="__main__")
            results.append((False, f"{argv[0]} ran without parsing its arguments"))
        except _Parsed:
            deprecated = DEPRECATED.search(said.getvalue())
            results.append(
                (
                    not deprecated,
                    f"a deprecated spelling: {deprecated[0]}" if deprecated else f"{argv[0]} accepts its arguments",
                )
            )
        except SystemExit as e:
            lines = said.getvalue().strip().splitlines() or [f"exit {e.code}"]
            results.append((False, lines[-1]))
    return results


def _words(text: str, cwd: Path) -> list[str]:
    """The words bash makes of `text` (quotes removed, globs expanded in cwd)."""
    proc = subprocess.run(["bash", "-c", f"printf '%s\\0' {text}"], cwd=cwd, capture_output=True, check=True)
    return proc.stdout.decode().split("\0")[:-1]


def _python_part(text: str) -> str:
    """The python/torchrun/make part of a command line: after a pipe, before a redirection."""
    part = text.split(" | ")[-1]
    return re.split(r"\s[<>]\s?\S+", part)[0]


def parse_plan(cmd: str, cwd: Path) -> tuple[list[list[str]], str, bool]:
    """What parsing a command means: (the script argument lists to parse, what else was checked, whether
    that passed). A make line: `make -n`, then every `python X.py` line of its recipe."""
    text = _python_part(cmd)
    if text.startswith("make "):
        proc = subprocess.run(
            ["bash", "-c", f"make -n {text[5:]}"], cwd=cwd, env=env(), capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            return [], f"make -n: {proc.stderr.strip()[-500:]}", False
        argvs = [
            argv
            for line in proc.stdout.splitlines()
            if (m := re.search(r"\S*python\S* (\S+\.py\b.*)$", line))
            for argv in parse_plan(f"python {m[1]}", cwd)[0]
        ]
        return argvs, f"make -n, and the {len(argvs)} python line(s) it would run", True
    if text.startswith((".venv/bin/pip", "pip")):
        pins = dict(re.findall(r"^(torch)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M))
        shown = dict(re.findall(r"\b(torch)==(\S+)", text))
        if shown and shown != pins:
            return [], f"pins {shown}, requirements.txt {pins}", False
        return [], "the torch pin equals requirements.txt's" if shown else "nothing to parse", True
    if text.startswith("python3 -m venv"):
        return [], "nothing to parse", True
    words = _words(text, cwd)
    if words[0] == "tensorboard":
        from tensorboard import program

        try:
            with contextlib.redirect_stderr(open(os.devnull, "w")):
                program.TensorBoard().configure(argv=words)
        except (SystemExit, ValueError) as e:
            return [], f"tensorboard refuses its arguments ({e})", False
        return [], "tensorboard accepts its arguments", True
    if words[0] == "torchrun":
        from torch.distributed.run import get_args_parser

        try:
            with contextlib.redirect_stderr(open(os.devnull, "w")):
                parsed = get_args_parser().parse_args(words[1:])
        except SystemExit:
            return [], "torchrun refuses its arguments", False
        words = ["python", parsed.training_script, *parsed.training_script_args]
    if words[0] not in ("python", "python3") or len(words) < 2 or not words[1].endswith(".py"):
        return [], "not a command this check can parse", False
    return [words[1:]], "", True


def parse_commands(cmds: list[Command], cwd: Path) -> list[tuple[bool, str]]:
    """(accepted, what was checked) for each command, parsing its arguments only: the scripts' parsers
    run in one process (`--parse-scripts`)."""
    plans = [parse_plan(c.text, cwd) for c in cmds]
    argvs = [argv for plan in plans for argv in plan[0]]
    proc = subprocess.run(
        [str(VENV / "bin" / "python"), str(Path(__file__).resolve()), "--parse-scripts"],
        input=json.dumps(argvs),
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"error: parsing the commands failed: {proc.stderr[-2000:]}")
    parsed = iter(json.loads(proc.stdout.strip().splitlines()[-1]))
    out = []
    for argvs_of, what, ok in plans:
        results = [next(parsed) for _ in argvs_of]
        bad = [r for a, r in zip(argvs_of, results) if not r[0]]
        if not ok or bad:
            out.append((False, what if not ok else f"{' '.join(argvs_of[results.index(bad[0])])[:150]}: {bad[0][1]}"))
        else:
            out.append((True, what or (results[0][1] if results else "parsed")))
    return out


# ---- running a command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tensorboard(cmd: str, cwd: Path) -> tuple[bool, str]:
    port = _free_port()
    log = cwd / f".tensorboard-{port}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {cmd} --host 127.0.0.1 --port {port}"],
            cwd=cwd,
            env=env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                return False, f"tensorboard exited with {proc.returncode}: {log.read_text()[-500:]}"
            with contextlib.suppress(OSError, ValueError):
                runs = json.loads(opener.open(f"http://127.0.0.1:{port}/data/runs", timeout=5).read())
                if runs:
                    return True, f"served {len(runs)} run(s) on a free port"
            time.sleep(1)
        return False, "tensorboard served no run within 120 s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def run_command(c: Command, cwd: Path) -> tuple[bool, str]:
    if c.text.startswith("tensorboard "):
        return run_tensorboard(c.text, cwd)
    proc = subprocess.run(
        ["bash", "-c", c.text],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=TIMEOUT,
    )
    said = proc.stdout + proc.stderr
    if DEPRECATED.search(proc.stderr):
        return False, f"a deprecated spelling: {DEPRECATED.search(proc.stderr)[0]}"
    if c.output:
        missing = [line for line in c.output if line not in said.splitlines()]
        if missing:
            return False, f"exit {proc.returncode}; did not print {missing[0]!r}; printed: {said.strip()[-800:]}"
        return True, f"printed the {len(c.output)} line(s) shown (exit {proc.returncode})"
    if proc.returncode != 0:
        return False, f"exit {proc.returncode}: {said.strip()[-1500:]}"
    return True, "exit 0"


# ---- the check


def selected(cmds: list["Command"], gpu: bool) -> list["Command"]:
    """Every command; with `gpu` (readme_check.py --gpu, on a GPU machine), only those marked (needs a
    GPU), each run for real except an install line."""
    return [runs_on_gpu(c) for c in cmds if c.marker == "needs a GPU"] if gpu else cmds


def runs_on_gpu(c: "Command") -> "Command":
    """A command marked (needs a GPU), to be run for real on a GPU machine (readme_check.py --gpu); an
    install line stays parsed only (it needs the network)."""
    if c.marker != "needs a GPU" or re.search(r"\bpip install\b|-m venv\b", c.text):
        return c
    return dataclasses.replace(c, marker="")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--parse-only", action="store_true", help="parse every command's arguments; run none")
    mode.add_argument("--list", action="store_true", help="list the commands and how each is checked")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies (their paths are printed)")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="on a GPU machine: run only the commands marked (needs a GPU), for real (the install lines "
        "stay parsed: they need the network)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cmds = selected(page_commands(ROOT), args.gpu)
    if args.list:
        for c in cmds:
            how = f"parsed only ({c.parse_only})" if c.parse_only else "runs"
            print(f"{c.page}:{c.line} [{c.section}] {how}: {c.text}")
        return 0
    failures, seen, scratches = [], set(), {}
    start = time.time()

    def log(message: str) -> None:
        print(f"[{time.time() - start:6.0f}s] {message}", flush=True)

    def report(c: Command, ok: bool, how: str, what: str) -> None:
        log(f"{c.page}:{c.line}: {'ok' if ok else 'FAILED'}, {how}: {c.text}" + ("" if ok else f"\n    {what}"))
        if not ok:
            failures.append(f"{c.page}:{c.line}: {c.text}\n    {what}")

    unique = []
    for c in cmds:
        if c.text in seen:
            log(f"{c.page}:{c.line}: shown before, checked once: {c.text}")
        else:
            seen.add(c.text)
            unique.append(c)
    parsed = [c for c in unique if args.parse_only or c.parse_only]
    # parsing needs no scratch copy: the project as it is
    for c, (ok, what) in zip(parsed, parse_commands(parsed, ROOT)):
        report(c, ok, f"parsed ({c.parse_only or 'parse-only'})", what)
    try:
        for c in unique:
            if c in parsed:
                continue
            group = c.section if c.section in ISOLATED else ""
            if group not in scratches:
                scratches[group] = make_scratch(Path(tempfile.mkdtemp(prefix="readme-check-")))
                log(f"scratch copy {scratches[group]}" + (f" (for '{group}')" if group else ""))
                if not group:
                    stand_ins(unique, scratches[group], log)
            ok, what = run_command(c, scratches[group])
            report(c, ok, "ran", what)
    finally:
        for scratch in scratches.values():
            if args.keep:
                print(f"kept {scratch}")
            else:
                shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    print(
        f"{len(seen)} commands of README.md and its pages checked, {len(failures)} failed "
        f"({'parsed only' if args.parse_only else 'run, or parsed where marked'}; {time.time() - start:.0f} s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--parse-scripts"]:  # the worker of parse_commands: argument lists in, results out
        results = parse_scripts(json.loads(sys.stdin.read()))
        sys.stdout = sys.__stdout__
        print(json.dumps(results))
        raise SystemExit(0)
    raise SystemExit(main())
