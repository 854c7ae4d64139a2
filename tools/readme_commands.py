"""The commands the README and its detail pages show (`make readme-check` runs them:
tools/readme_check.py). Finding them is this module; running them is the other.

What counts as a command:
  - each command of a ```bash block (a line ending in `\\` joined with the next; `# ...` comments dropped);
  - each `$ ` line of a ```console block, whose following lines are output it must print;
  - the first cell of a table row when it is a command in backticks (`python ...`, `make ...`,
    `tensorboard ...`, `torchrun ...`, or a pipe into one of them);
  - a whole command in backticks in the prose (`make clean-demo`, `python X.py ...`).
A command marked "(needs a GPU)", "(needs a SLURM cluster)" or "(needs several nodes)" (in a comment
on its line, in the comment lines just above it, in the first comment line of its block for the
whole block, or in its table row), and the checks in CHECKS, are parsed only.

The pages, in the order their commands run: the README, then the docs pages its detail moved to
(PAGES), each linked from it (tests/tools/test_readme_check.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

PAGES = ("README.md", "docs/CTRANSLATE2.md", "docs/GUARANTEES.md", "docs/MIGRATIONS.md")
MARKER = re.compile(r"\((needs a GPU|needs a SLURM cluster|needs several nodes)\)")
COMMAND_START = re.compile(r"^(python3? |make |tensorboard |torchrun |\.venv/bin/pip |echo .*\| python )")
INLINE = re.compile(r"^(make [\w-]+|python \S+\.py .+)$")
# The README's checks that are runs of their own (the suite, the results check, this check) or that a
# test runs at tiny sizes: checked for their arguments here (make -n), run where the reason says.
CHECKS = {
    "make test": "the suite itself (CI: .ci/run)",
    "make test-fast": "the suite without its slow tests",
    "make results-check": "its own check (about five minutes)",
    "make readme-check": "this check",
    "make test-gpu": "the GPU tests, on a GPU machine (tools/gpu_study.sh; skipped without CUDA)",
    "make bench": "tests/tools/test_benchmarks.py runs benchmarks/decode.py and train.py at tiny sizes",
}


@dataclass
class Command:
    text: str  # as shown (continuations joined, comment dropped)
    section: str  # the page's `## ` section
    line: int  # where it starts in its page
    marker: str = ""  # "needs a GPU", ... : parsed only
    output: list[str] = field(default_factory=list)  # a console block's expected lines
    page: str = "README.md"  # the file that shows it

    @property
    def check(self) -> str:
        return CHECKS.get(self.text, "")

    @property
    def parse_only(self) -> str:
        """Why it is only parsed ('' when it runs)."""
        return self.marker or self.check


def _strip_comment(line: str) -> tuple[str, str]:
    """(command, comment) of a shell line: the first `#` outside quotes starts the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i:]
    return line.rstrip(), ""


def commands(readme: str) -> list[Command]:
    """Every command the README shows, in order."""
    out: list[Command] = []
    section, block, start, lang = "", None, 0, ""
    lines = readme.splitlines()
    for number, line in enumerate(lines, 1):
        if block is None and line.startswith("## "):
            section = line[3:].strip()
        if line.startswith("```"):
            if block is None:
                block, start, lang = [], number, line[3:].strip()
            else:
                out += _block_commands(block, lang, section, start)
                block = None
            continue
        if block is not None:
            block.append(line)
            continue
        cell = re.match(r"^\| `([^`]+)` \|(.*)$", line)
        if cell and COMMAND_START.match(cell.group(1).replace("\\|", "|")):
            marker = MARKER.search(cell.group(2))
            out.append(Command(cell.group(1).replace("\\|", "|"), section, number, marker[1] if marker else ""))
        elif section != "Contents" and not line.startswith(("|", "<!--")):  # in the prose: `make clean-demo`
            out += [Command(span, section, number) for span in re.findall(r"`([^`]+)`", line) if INLINE.match(span)]
    return out


def _block_commands(block: list[str], lang: str, section: str, start: int) -> list[Command]:
    out: list[Command] = []
    if lang == "console":
        for offset, line in enumerate(block, 1):
            if line.startswith("$ "):
                out.append(Command(line[2:].strip(), section, start + offset))
            elif out and line.strip():
                out[-1].output.append(line)
        return out
    if lang != "bash":
        return out
    whole = MARKER.search(block[0]) if block and block[0].lstrip().startswith("#") else None
    pending, text, first = "", "", 0
    for offset, raw in enumerate(block, 1):
        command, comment = _strip_comment(raw)
        if not text:
            first = start + offset
        if not command.strip():
            pending += comment
            continue
        if command.endswith("\\"):
            text += command[:-1].rstrip() + " "
            pending += comment
            continue
        text += command.strip()
        marker = MARKER.search(pending + comment) or whole
        out.append(Command(" ".join(text.split()), section, first, marker[1] if marker else ""))
        pending, text = "", ""
    return out


def page_commands(root: Path) -> list[Command]:
    """Every command of every page in PAGES, page by page, each knowing its page."""
    found = []
    for page in PAGES:
        for command in commands((root / page).read_text(encoding="utf-8")):
            command.page = page
            found.append(command)
    return found
