"""The GPU machine's scripts (benchmarks/gpu_check.sh, benchmarks/gpu_wheels.sh, tools/gpu_study.sh) and
their notes (docs/GPU.md): limits that fit the time given per command, settings with defaults that
--help names, and words for any GPU machine, not one particular environment's."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("benchmarks/gpu_check.sh", "benchmarks/gpu_wheels.sh", "tools/gpu_study.sh")

# What a note for one particular lending environment said instead of what any GPU machine needs.
ENVIRONMENT_WORDS = (
    r"\blent\b",
    r"\bloans?\b",
    r"run\(command",
    r"\bcarry\s*[=:]",
    r"\bcarry\b.*\.whl",
    r"files_at",
    r"give_back",
    r"timeout_s",
    r"budget_left",
    r"/work/",
    r"KINDS\.md",
    r"device[- ]minutes?",
    r"device tool",
    r"(?-i:\$OUT\b|\$\{OUT\b)",  # the output folder a lending tool gave (case matters: $out is a variable)
)


def bash(args: list[str], **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_CHECK_", "GPU_WHEELS_", "GPU_STUDY_"))}
    return subprocess.run(["bash", *args], cwd=ROOT, capture_output=True, text=True, env={**clean, **env}, timeout=60)


def check_limits(part: str, **env: str) -> dict[str, int]:
    proc = bash(["benchmarks/gpu_check.sh", part, "--limits"], **env)
    assert proc.returncode == 0, proc.stderr
    return {name: int(seconds) for name, seconds in (line.split() for line in proc.stdout.splitlines())}


@pytest.mark.parametrize("total", [None, 400, 600, 3600])
def test_gpu_check_steps_fit_the_time_limit_per_command(total) -> None:
    """benchmarks/gpu_check.sh: each part's steps' time limits, with the 10 s `timeout -k` grants each
    to die, add up to at most GPU_CHECK_SECONDS less GPU_CHECK_RESERVE (the set-up and copying back;
    a command that ran over lost everything the machine had measured), and use that time; every step
    the part runs has one, the default is a 600 s command."""
    script = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    assert "timeout -k 10 " in script
    env = {} if total is None else {"GPU_CHECK_SECONDS": str(total)}
    room = (total or 600) - 60
    for part in ("decode", "train"):
        body = re.search(rf"^{part}\(\) {{\n(.*?)^}}", script, flags=re.M | re.S).group(1)
        names = re.findall(r"^\s*step \d+ (\w+) ", body, flags=re.M)
        limits = check_limits(part, **env)
        assert list(limits) == names and len(names) >= 2, (part, limits)
        used = sum(limits.values()) + 10 * len(limits)
        assert room - len(limits) <= used <= room, (part, limits)
        assert min(limits.values()) >= 30
    assert check_limits("decode", GPU_CHECK_SECONDS="500", GPU_CHECK_RESERVE="100")["decode"] < 300


@pytest.mark.parametrize(
    "args,env,says",
    [
        ([], {}, "decode|train"),
        (["decode", "--limit"], {}, "decode|train"),
        (["train"], {"GPU_CHECK_SECONDS": "150"}, "GPU_CHECK_SECONDS=150"),
        (["train"], {"GPU_CHECK_SECONDS": "10m"}, "GPU_CHECK_SECONDS (10m)"),
    ],
)
def test_gpu_check_refuses_a_part_or_a_limit_it_cannot_keep(args, env, says) -> None:
    """No part, an unknown option, or a time limit that leaves a step under 30 s: one line, exit 2,
    before anything is run or written."""
    proc = bash(["benchmarks/gpu_check.sh", *args], GPU_CHECK_OUT="/nonexistent/out", **env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and says in proc.stderr


def test_the_gpu_scripts_name_their_settings_in_help() -> None:
    """--help prints each script's header, which names every setting the script reads from the
    environment (its time limits and folders, with their defaults)."""
    for script in SCRIPTS:
        proc = bash([script, "--help"])
        assert proc.returncode == 0 and proc.stderr == "", (script, proc.stderr)
        text = (ROOT / script).read_text()
        read = set(re.findall(r"\$\{((?:GPU_\w+|MODEL|DRY_RUN|PYTHON))[:}-]", text))
        assert read, script
        for name in read:
            assert re.search(rf"^  {name}\b", proc.stdout, flags=re.M), (script, name)


def test_installing_the_wheels_without_any_is_one_line(tmp_path: Path) -> None:
    """`benchmarks/gpu_wheels.sh install` on a machine whose wheel folder is empty: one line naming
    the folder and how to fill it, exit 2; nothing fetched."""
    proc = bash(["benchmarks/gpu_wheels.sh", "install"], GPU_WHEELS_DIR=str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"error: no wheels in {tmp_path} ") and "gpu_wheels.sh" in proc.stderr


def environment_words(text: str) -> list[str]:
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if any(re.search(w, line, flags=re.I) for w in ENVIRONMENT_WORDS)]  # fmt: skip


def test_the_gpu_notes_name_no_particular_environment() -> None:
    """The GPU scripts and every page that describes them say what any GPU machine without network
    needs (wheels sent along, a time limit per command, a size limit for what is sent), not the tools,
    calls, paths or budgets of one environment that lends GPUs."""
    pages = [*SCRIPTS, "docs/GPU.md", "README.md", "benchmarks/README.md", *sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]  # fmt: skip
    found = {page: environment_words((ROOT / page).read_text()) for page in pages}
    assert not any(found.values()), {page: hits for page, hits in found.items() if hits}
    assert environment_words('then run(command=...), carry=[".whl"], and give_back') != []
    gpu = (ROOT / "docs" / "GPU.md").read_text()
    for need in ("--no-index --find-links", "time limit per command", "size limit"):
        assert need in gpu, need
