"""The README's results are compare.py's output, verbatim: every generated block equals the
committed file it names (results/<study>/*summary*.md), and the blocks cover every study. That the
committed files equal what compare.py writes from the runs now is `make results-check` (slow)."""

from __future__ import annotations

import importlib.util
import json
import re

from helpers import ROOT

spec = importlib.util.spec_from_file_location("readme_results", ROOT / "tools" / "readme_results.py")
readme_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_results)


def test_readme_results_equal_the_committed_tables_and_findings() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_results.stale_blocks(readme) == []
    files = {f for f, _ in readme_results.blocks(readme)}
    for prefix, *_ in readme_results.STUDIES:  # every study's findings are in the README
        assert f"{prefix}_findings.md" in files, prefix
    for name in ("demo", "length", "report/length"):
        assert f"results/{name}/summary.md" in files


def test_an_edited_readme_cell_is_caught() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| demo/rope | rope | 5 |"))
    edited = readme.replace(row, row.replace(" 5/5 |", " 4/5 |"), 1)
    assert edited != readme and len(readme_results.stale_blocks(edited)) == 1
    assert readme_results.stale_blocks(readme_results.render(edited)) == []


def test_committed_findings_agree_with_their_tables() -> None:
    """Quick consistency of the committed files: the table's p is the findings' test-set p."""
    for prefix, *_ in readme_results.STUDIES:
        report = json.loads((ROOT / f"{prefix}.json").read_text())
        findings = json.loads((ROOT / f"{prefix}_findings.json").read_text())
        assert findings["baseline"] == report["baseline"] and findings["n_samples"] == 10000
        test_rows = {r["config"]: r for t in findings["tables"] if t["name"] == "test" for r in t["rows"]}
        for g in report["groups"]:
            if not g["is_baseline"]:
                assert g["p_value"] == test_rows[g["label"]]["p_value"], (prefix, g["label"])


# What the results sections may say outside generated blocks: method only. A metric figure (a decimal
# number or a signed one) or a verdict word there is a hand-written result, unless the line is one of
# these method sentences (data facts, settings, definitions), matched by a fragment of the line.
VERDICT_WORDS = re.compile(r"\b(significant|ahead|behind|every seed)\b", re.IGNORECASE)
FIGURE = re.compile(r"(?<![\w.])[+−±]\s?\d|(?<![\w.-])\d+\.\d+(?![\w.])")
METHOD_LINES = (
    "Student's t with n − 1 degrees of freedom",
    "only when it is declared, its Holm-adjusted p is below 0.05",   # the rule itself
    "worded as a direction only when it is declared",
    "difference lies beyond the tie margin (0.1 BLEU, 0.01 nats)",
    "(0.05 nats) effect would need",
    "the smallest effect its seeds can see (80% power",
    "assumes independent, roughly normal seed effects (Dror et al., ACL 2018",
    "what may be called a direction",
    "**What may be called a direction.**",
    "a high peak learning rate (2e-3)",
    "length-bucketed 1,500-token batches (0.1% padding)",
    "pre-norm, tied",
    "The demo model (1.95M parameters)",
    "`configs/length/` trains the demo model (d_model 128, 2+2 layers, 1.95M parameters",
    "48.2M parameters (48.5M with the learnable table)",
    "rate 7e-4, 800 updates",
    "runs trained side by side (`nvidia-smi`: 100% busy, 83 GB): all ten trained and tested in 5.7",
)


def results_section_lines(readme: str) -> list[tuple[int, str]]:
    """(line number, text) of the README's results section outside generated blocks, code blocks,
    tables, images and HTML."""
    lines = readme.splitlines()
    start = lines.index("## Results")
    end = lines.index("## Commands")
    out, generated, code = [], False, False
    for number in range(start, end):
        line = lines[number]
        if line.startswith("<!-- generated from"):
            generated = True
        if line.startswith("```"):
            code = not code
            continue
        if not (generated or code or line.startswith(("|", "![", "<"))):
            out.append((number + 1, line))
        if line.startswith("<!-- end of"):
            generated = False
    return out


def hand_written_results(readme: str) -> list[str]:
    return [f"README.md:{n}: {line}" for n, line in results_section_lines(readme)
            if (VERDICT_WORDS.search(line) or FIGURE.search(line)) and not any(m in line for m in METHOD_LINES)]


def test_no_hand_written_result_outside_the_generated_blocks() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert hand_written_results(readme) == []
    # the check sees a figure or a verdict typed into the prose, and an edited generated sentence
    prose = next(line for _, line in results_section_lines(readme) if line.startswith("Three studies."))
    for typed in ("RoPE is ahead of sinusoidal.", "RoPE gains +0.68 BLEU.", "a gap of 0.68 BLEU"):
        assert hand_written_results(readme.replace(prose, f"{prose} {typed}", 1)), typed
    bullet = next(line for line in readme.splitlines() if line.startswith("- `demo/rope` against"))
    edited = readme.replace(bullet, re.sub(r"\d\.\d\d", "9.99", bullet, count=1), 1)
    assert edited != readme and readme_results.stale_blocks(edited)
