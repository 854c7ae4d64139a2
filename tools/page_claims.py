"""What a study's generated text may not claim, checked on the committed findings (`<prefix>_findings.json`,
`<prefix>_findings.md`, `<prefix>_headline.md`; the pages copy them verbatim): an exploratory reading (the
current rule's, beside a family declared under an older one) never says "declared"; and a row decided at a
sequential plan's looks prints no fixed-design figure (a detectable Δ, a power or the seeds for 80% at
Holm's first step: what a fixed design of its seeds would see, not its plan). tools/readme_results.py
`check` runs them with the rest of the pages' checks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

# a fixed design's planning figures as the findings print them (study/pages/headline._power_text,
# study/pages/findings_markdown: the equivalence and detectable cells, the α note)
FIXED_FIGURES = re.compile(
    r"detectable [^;|]*80% power|power \d+% if the true difference|seeds for 80%|seeds for the declared effect"
    r"|two-sided α"
)
EXPLORATORY_SENTENCE = "Exploratory (rule `"


def _tables(text: str) -> Iterator[tuple[list[str], list[str]]]:
    """(header cells, row cells) of every row of every markdown table of a text."""
    header: list[str] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not header:
            header = cells
        elif not line.startswith("|---"):
            yield header, cells


def exploratory_declared(name: str, text: str) -> list[str]:
    """The exploratory readings of a findings or headline markdown file that say "declared": the
    sentence after "Exploratory (rule ...)" and every cell of a column headed "exploratory ..."."""
    out = [
        f"{name}: {line[:100]}"
        for line in text.splitlines()
        if EXPLORATORY_SENTENCE in line and "declared" in line.split(EXPLORATORY_SENTENCE, 1)[1]
    ]
    for header, cells in _tables(text):
        for title, cell in zip(header, cells):
            if title.lower().startswith("exploratory") and "declared" in cell:
                out.append(f"{name}: {cells[0]}, {cells[1]}: {title}: {cell[:80]}")
    return out


def exploratory_declared_json(name: str, findings: dict) -> list[str]:
    """The rows of a findings JSON whose exploratory finding says "declared"."""
    return [
        f"{name}: {r['config']}, {r['compared_on']}: exploratory finding {r['exploratory']['finding'][:80]}"
        for t in findings["tables"]
        for r in t["rows"]
        if r.get("exploratory") and "declared" in r["exploratory"]["finding"]
    ]


def sequential_fixed_figures(name: str, findings: dict, text: str) -> list[str]:
    """The lines of a findings markdown that print a fixed-design figure for a row decided at a
    sequential plan's looks (its full sentence and its findings-table row)."""
    out = []
    lines = text.splitlines()
    for t in findings["tables"]:
        for r in t["rows"]:
            if not r.get("look"):
                continue
            sentence = f"- `{r['config']}` against `{findings['baseline']}`, {r['compared_on']}:"
            row = f"| {r['config']} | {r['compared_on']} (n="
            for line in lines:
                if line.startswith((sentence, row)) and FIXED_FIGURES.search(line):
                    out.append(f"{name}: {r['config']}, {r['compared_on']}: {FIXED_FIGURES.search(line)[0]}")
    return out


def claim_failures(root: Path, prefixes: list[str]) -> list[str]:
    """Every failure of the two checks over the committed files of the studies' `prefixes`."""
    out = []
    for prefix in prefixes:
        findings_json = root / f"{prefix}_findings.json"
        if not findings_json.is_file():
            continue
        findings = json.loads(findings_json.read_text(encoding="utf-8"))
        markdown = (root / f"{prefix}_findings.md").read_text(encoding="utf-8")
        out += exploratory_declared_json(f"{prefix}_findings.json", findings)
        out += exploratory_declared(f"{prefix}_findings.md", markdown)
        headline = root / f"{prefix}_headline.md"
        if headline.is_file():
            out += exploratory_declared(f"{prefix}_headline.md", headline.read_text(encoding="utf-8"))
        out += sequential_fixed_figures(f"{prefix}_findings.md", findings, markdown)
    return out
