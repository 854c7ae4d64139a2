"""The README's results are compare.py's output, verbatim: every generated block equals the
committed file it names (results/<study>/*summary*.md), and the blocks cover every study. That the
committed files equal what compare.py writes from the runs now is `make results-check` (slow)."""

from __future__ import annotations

import importlib.util
import json

from helpers import ROOT

spec = importlib.util.spec_from_file_location("readme_results", ROOT / "docs" / "tools" / "readme_results.py")
readme_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_results)


def test_readme_results_equal_the_committed_tables_and_findings() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_results.stale_blocks(readme) == []
    files = {f for f, _ in readme_results.blocks(readme)}
    for prefix, _, _ in readme_results.STUDIES:  # every study's findings are in the README
        assert f"{prefix}_findings.md" in files, prefix
    for name in ("demo", "length", "report/length"):
        assert f"results/{name}/summary.md" in files


def test_an_edited_readme_cell_is_caught() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| demo/rope | rope | 3 |"))
    edited = readme.replace(row, row.replace(" 3/3 |", " 2/3 |"), 1)
    assert edited != readme and len(readme_results.stale_blocks(edited)) == 1
    assert readme_results.stale_blocks(readme_results.render(edited)) == []


def test_committed_findings_agree_with_their_tables() -> None:
    """Quick consistency of the committed files: the table's p is the findings' test-set p."""
    for prefix, _, _ in readme_results.STUDIES:
        report = json.loads((ROOT / f"{prefix}.json").read_text())
        findings = json.loads((ROOT / f"{prefix}_findings.json").read_text())
        assert findings["baseline"] == report["baseline"] and findings["n_samples"] == 10000
        test_rows = {r["config"]: r for t in findings["tables"] if t["name"] == "test" for r in t["rows"]}
        for g in report["groups"]:
            if not g["is_baseline"]:
                assert g["p_value"] == test_rows[g["label"]]["p_value"], (prefix, g["label"])
