"""Every command the README shows is checked (tools/readme_check.py): run for real in a scratch copy of
the project with tiny configs (`make readme-check`, which .ci/run runs after the suite), or, when the README
marks it as needing a GPU, a SLURM cluster or several nodes, or it is a check of its own, its
arguments parsed. The default suite finds and classifies every command and parses all of them
(seconds); the check fails on a flag a command does not take or a deprecated spelling."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from helpers import ROOT

spec = importlib.util.spec_from_file_location("readme_check", ROOT / "tools" / "readme_check.py")
readme_check = importlib.util.module_from_spec(spec)
sys.modules["readme_check"] = readme_check  # its dataclass looks its module up
spec.loader.exec_module(readme_check)
import readme_commands  # noqa: E402 (tools/, on the path once readme_check is loaded)

SCRIPTS = ("train.py", "test.py", "inference.py", "visualize.py", "compare.py", "sweep.py", "average.py", "export.py")


def shown_commands() -> list:
    return readme_commands.page_commands(ROOT)


def test_the_readme_stays_short_and_links_every_page_its_detail_moved_to() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # a manual until its results: the results are short tables (one generated block per study), the notes once
    assert len(readme.splitlines()) < 535
    for page in readme_commands.PAGES[1:]:
        assert f"]({page})" in readme, page
    moved = [c for c in shown_commands() if c.page == "docs/CTRANSLATE2.md"]
    assert moved and all(not c.parse_only for c in moved)  # the moved commands still run


def test_every_command_of_the_readme_is_found_and_the_walk_through_runs() -> None:
    cmds = shown_commands()
    walk = [c for c in cmds if c.section == "A ten-minute walk-through" and not c.parse_only]
    for start in (
        "python train.py",
        "tensorboard",
        "python test.py",
        "python inference.py",
        "python compare.py",
        "python visualize.py",
    ):
        assert any(c.text.startswith(start) for c in walk), start
    for script in SCRIPTS:  # each script has a command that runs for real
        assert any(c.text.startswith(f"python {script}") and not c.parse_only for c in cmds), script
    assert {"make demo", "make test"} <= {c.text for c in cmds if c.section == "The two commands"}
    # what cannot run here is marked, and only that is parsed alone
    for c in cmds:
        needs = (
            "--launcher slurm" in c.text and "SLURM",
            "--nnodes" in c.text and "several nodes",
            "--runs_per_gpu" in c.text and "GPU",
            "cu128" in c.text and "GPU",
        )
        for need in filter(None, needs):
            assert need in c.parse_only, (c.line, c.text)
        assert not c.parse_only or c.marker or c.text in readme_commands.CHECKS, (c.line, c.text)


def test_markers_comments_continuations_and_console_blocks_are_read() -> None:
    text = "\n".join(
        [
            "## Sweeps",
            "```bash",
            "python x.py --flag '# not a comment'",
            "# two runs (needs a GPU)",
            "python sweep.py a.yaml \\",
            "    --seeds 1 2   # two seeds",
            "make length   # (needs a SLURM cluster)",
            "```",
            "```bash",
            "# (needs several nodes) every line of this block",
            "torchrun a",
            "torchrun b",
            "```",
            "```console",
            "$ python train.py --bad",
            "error: the line it prints",
            "```",
            "| `python test.py --run r` | scores (needs a GPU) |",
            "| `--run DIR` | a flag row |",
            "Prose names `make clean-demo` and `python average.py --run r --average_last 2`, not `--run r`.",
        ]
    )
    got = [(c.text, c.marker, c.output) for c in readme_commands.commands(text)]
    assert got == [
        ("python x.py --flag '# not a comment'", "", []),
        ("python sweep.py a.yaml --seeds 1 2", "needs a GPU", []),
        ("make length", "needs a SLURM cluster", []),
        ("torchrun a", "needs several nodes", []),
        ("torchrun b", "needs several nodes", []),
        ("python train.py --bad", "", ["error: the line it prints"]),
        ("python test.py --run r", "needs a GPU", []),
        ("make clean-demo", "", []),
        ("python average.py --run r --average_last 2", "", []),
    ]


@pytest.mark.slow
def test_a_wrong_or_deprecated_flag_fails_the_check() -> None:
    cmds = [
        readme_check.Command(text, "Commands", n)
        for n, text in enumerate(
            [
                "python train.py --config configs/demo/rope.yaml",  # accepted
                "python train.py --config configs/demo/rope.yaml --no_such_flag",
                "python inference.py --run runs/demo/rope --input in.fr",  # the spelling before --src
                "torchrun --nproc_per_node 2 train.py --confg x.yaml",
                "make no-such-target",
                ".venv/bin/pip install torch==1.0 --index-url https://download.pytorch.org/whl/cu128",
            ]
        )
    ]
    results = readme_check.parse_commands(cmds, ROOT)
    assert [ok for ok, _ in results] == [True, False, False, False, False, False], results
    assert "deprecated" in results[2][1]


@pytest.mark.slow
def test_every_command_of_the_readme_parses() -> None:
    proc = subprocess.run(
        [sys.executable, "tools/readme_check.py", "--parse-only"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_on_a_gpu_machine_only_the_gpu_commands_run_and_install_lines_stay_parsed() -> None:
    cmds = shown_commands()
    gpu = readme_check.selected(cmds, gpu=True)
    assert gpu and {c.text for c in gpu} == {c.text for c in cmds if c.marker == "needs a GPU"}
    runs = [c for c in gpu if not c.parse_only]
    assert runs and all("pip install" not in c.text and "-m venv" not in c.text for c in runs)
    assert all(c.parse_only == "needs a GPU" for c in gpu if "pip install" in c.text)
    assert readme_check.selected(cmds, gpu=False) == cmds
