"""Each archived study reproduces from a committed config: for every run folder in results/, a
command its study page gives (results/<study>/README.md: a `make` target, expanded by `make -n`, or
a `python sweep.py` line) produces that run folder through sweep.py's own run expansion, with a
configuration equal to the archived config.yaml in experiment keys (settings/key_roles.py)."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shlex
import subprocess

import pytest
from helpers import ROOT

from commands import sweep
from settings.config import flatten, load_config, to_dict
from settings.key_roles import configuration_settings

spec = importlib.util.spec_from_file_location("readme_results", ROOT / "tools" / "readme_results.py")
readme_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_results)


def readme_commands() -> list[str]:
    """The `make ...` and `python sweep.py ...` lines of the code blocks of the study pages (the
    pages tools/readme_results.py keeps: results/<study>/README.md)."""
    commands = []
    for page in readme_results.PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split("#")[0].strip()
                if line.startswith(("make ", "python sweep.py")):
                    commands.append(line)
    return commands


def sweep_argvs(command: str) -> list[list[str]]:
    """The sweep.py argument lists a README command runs (a make target: its recipe, as `make -n` prints it)."""
    if command.startswith("python sweep.py"):
        lines = [command]
    else:
        printed = subprocess.run(
            ["make", "-n", "-s", *shlex.split(command)[1:], "PY=python"],
            cwd=ROOT,
            text=True,
            capture_output=True,
            check=True,
            env={**os.environ, "MAKEFLAGS": ""},
        ).stdout
        lines = [line for line in printed.splitlines() if " sweep.py " in f" {line} "]
    argvs = []
    for line in lines:
        words = shlex.split(line[line.index("sweep.py") + len("sweep.py") :])
        argvs.append([m for w in words for m in (sorted(glob.glob(str(ROOT / w))) if "*" in w else [w])])
    return argvs


def settings(config: dict) -> dict:
    flat = flatten(config)
    return configuration_settings(flat, flat.get("model.positional.name"))


@pytest.fixture(scope="module")
def produced() -> dict[str, dict]:
    """run folder (relative, runs/...) -> the configuration the README's commands give it."""
    out = {}
    cwd = os.getcwd()
    os.chdir(ROOT)  # the configs and run folders are relative to the repository root
    try:
        for command in readme_commands():
            for argv in sweep_argvs(command):
                args = sweep.build_parser().parse_args(argv)
                for run in sweep.expand_runs(args.configs, args.overrides, args.seeds, args.runs_root):
                    out[str(run.run_dir)] = settings(to_dict(run.cfg))
    finally:
        os.chdir(cwd)
    return out


@pytest.mark.slow
def test_every_archived_run_comes_from_a_readme_command(produced):
    runs = sorted(p.parent for p in ROOT.glob("results/**/config.yaml"))
    assert len(runs) > 60
    missing, differ = [], []
    for run in runs:
        folder = "runs/" + str(run.relative_to(ROOT / "results"))
        if folder not in produced:
            missing.append(folder)
            continue
        archived = settings(to_dict(load_config(run / "config.yaml")))
        if archived != produced[folder]:
            keys = sorted(k for k in {*archived, *produced[folder]} if archived.get(k) != produced[folder].get(k))
            differ.append(f"{folder}: {', '.join(keys[:5])}")
    assert missing == [] and differ == [], json.dumps({"no study page command": missing, "differs": differ}, indent=1)


def test_every_run_a_study_page_command_gives_is_archived(produced):
    """The converse (issue 77): a study page's command names no run the archive lacks (demo_confirm's page
    gave `--seeds 102 … 120`, its family's declared seeds, where only 102–112 ran)."""
    archived = {"runs/" + str(p.parent.relative_to(ROOT / "results")) for p in ROOT.glob("results/**/config.yaml")}
    assert sorted(set(produced) - archived) == []
