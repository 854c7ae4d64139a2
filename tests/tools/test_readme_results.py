"""The results in the README and in each study's page (results/<study>/README.md) are compare.py's
output, verbatim: every generated block equals the committed file it names, every study's tables,
findings and result sentences have their blocks, and no line of result text outside the blocks
states a figure or a verdict. That the committed files equal what compare.py writes from the runs
now is `make results-check` (slow)."""

from __future__ import annotations

import importlib.util
import json
import re

from helpers import ROOT

from tools.readme_study_blocks import cells, study_results, verdicts_line

spec = importlib.util.spec_from_file_location("readme_results", ROOT / "tools" / "readme_results.py")
readme_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_results)

DEMO_PAGE = "results/demo/README.md"


def text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def texts() -> dict[str, str]:
    return {name: text(name) for name in readme_results.RESULT_TEXT}


def test_the_results_check_passes() -> None:
    """What `tools/readme_results.py check` fails on, all at once."""
    assert readme_results.check() == []


def test_every_block_equals_its_committed_file_and_every_study_has_its_blocks() -> None:
    for name in readme_results.DOCUMENTS:
        assert readme_results.stale_blocks(text(name), name=name) == [], name
    assert readme_results.missing_blocks(texts()) == []
    pages = {f: page for page in readme_results.PAGES for f, _ in readme_results.blocks(text(page))}
    for prefix, *_ in readme_results.STUDIES:  # every study's findings are in a page
        assert f"{prefix}_findings.md" in pages, prefix
    for name in ("demo", "length", "report/length"):  # its tables in its own page, its comparisons in the README
        assert pages[f"results/{name}/summary.md"] == f"results/{name}/README.md"
        assert f"results/{name}/summary_findings.json" in {f for f, _ in readme_results.blocks(text("README.md"))}


def test_an_edited_cell_is_caught() -> None:
    page = text(DEMO_PAGE)
    row = next(line for line in page.splitlines() if line.startswith("| demo/rope | rope | "))
    edited = page.replace(row, row.replace("| demo/rope | rope | ", "| demo/rope | rope | 9", 1), 1)
    assert edited != page and len(readme_results.stale_blocks(edited, name=DEMO_PAGE)) == 1
    assert readme_results.stale_blocks(readme_results.render(edited), name=DEMO_PAGE) == []


def test_a_missing_block_or_link_is_caught() -> None:
    docs = texts()
    readme = docs["README.md"]
    block = re.search(
        r"<!-- generated from results/length/summary_findings\.json.*?<!-- end of \S+ -->", readme, re.DOTALL
    )
    assert readme_results.missing_blocks({**docs, "README.md": readme.replace(block[0], "")}) == [
        "README.md has no block of results/length/summary_findings.json"
    ]
    unlinked = readme.replace("](results/length/README.md)", "](results/README.md)")
    assert readme_results.missing_blocks({**docs, "README.md": unlinked}) == [
        "README.md does not link to results/length/README.md"
    ]
    page = docs[DEMO_PAGE]
    findings = re.search(
        r"<!-- generated from results/demo/summary_findings\.md.*?<!-- end of \S+ -->", page, re.DOTALL
    )
    assert readme_results.missing_blocks({**docs, DEMO_PAGE: page.replace(findings[0], "")}) == [
        f"{DEMO_PAGE} has no block of results/demo/summary_findings.md"
    ]
    assert readme_results.broken_links(DEMO_PAGE, page.replace("](summary_bleu.png)", "](summary_blue.png)")) == [
        f"{DEMO_PAGE} links to summary_blue.png, which does not exist"
    ]


def test_committed_findings_agree_with_their_tables() -> None:
    """Quick consistency of the committed files: the table's p is the findings' test-set p."""
    for prefix, *_ in readme_results.STUDIES:
        report = json.loads((ROOT / f"{prefix}.json").read_text())
        findings = json.loads((ROOT / f"{prefix}_findings.json").read_text())
        assert findings["baseline"] == report["baseline"] and findings["n_samples"] == 10000
        test_rows = {  # (the own test split's row: a row per declared test set beside it)
            r["config"]: r
            for t in findings["tables"]
            if t["name"] == "test"
            for r in t["rows"]
            if r["compared_on"] == "test set"
        }
        for g in report["groups"]:
            if not g["is_baseline"]:
                assert g["p_value"] == test_rows[g["label"]]["p_value"], (prefix, g["label"])


def test_no_hand_written_result_outside_the_generated_blocks() -> None:
    for name, doc in texts().items():
        assert readme_results.hand_written_results(doc, name) == [], name
    # the check sees a figure or a verdict typed into the README's results prose, a study page's
    # method text or the results index, and an edited generated sentence
    for name, first in (
        ("README.md", "Each study in `results/` has a page"),
        (DEMO_PAGE, "The demo trains on all source"),
        ("results/README.md", "The question is about encodings"),
    ):
        doc = text(name)
        prose = next(line for _, line in readme_results.result_lines(name, doc) if line.startswith(first))
        typed_results = (
            "RoPE is ahead of sinusoidal.",
            "RoPE gains +0.68 BLEU.",
            "a gap of 0.68 BLEU",
            "All sixty runs are in.",  # how far a study got (issue 77)
            "The goal is 0.15 nats; not every row reached it.",
            "The plan stopped at look 2.",
        )
        for typed in typed_results:
            assert readme_results.hand_written_results(doc.replace(prose, f"{prose} {typed}", 1), name), (name, typed)
    readme = text("README.md")
    bullet = next(line for line in readme.splitlines() if line.startswith("| `demo/rope` | test set"))
    edited = readme.replace(bullet, re.sub(r"\d\.\d\d", "9.99", bullet, count=1), 1)
    assert edited != readme and readme_results.stale_blocks(edited)
    # in the README the guard reads the results section only (elsewhere figures are settings, benchmarks)
    lines = readme.splitlines()
    start = lines.index("## Results") + 1
    end = next(n for n in range(start, len(lines)) if lines[n].startswith("## ")) + 1
    assert {n for n, _ in readme_results.result_lines("README.md", readme)} <= set(range(start, end))


def declared_rows(prefix: str) -> list[tuple[str, str]]:
    findings = json.loads((ROOT / f"{prefix}_findings.json").read_text())
    return [(r["config"], r["compared_on"]) for t in findings["tables"] for r in t["rows"] if r["declared"]]


def test_the_readme_has_a_row_per_declared_comparison_and_the_notes_once() -> None:
    """README's results: per study page one short table, a row per declared comparison (its verdict and
    the figures behind it, as the study's headline states them, less the descriptive column), and the
    notes on intervals and rules once, in its glossary, not under every table."""
    readme = text("README.md")
    got = dict(readme_results.blocks(readme))
    for prefix, *_ in readme_results.PAGES.values():
        body = got[f"{prefix}_findings.json"]
        rows = [cells(line) for line in body.splitlines() if line.startswith("| `")]
        declared = declared_rows(prefix)
        assert len(rows) == len(declared), prefix
        headline = [cells(line) for line in text(f"{prefix}_headline.md").splitlines() if line.startswith("| `")]
        for row, (config, compared), full in zip(rows, declared, headline):
            assert row[0] == f"`{config}`" and row[1].startswith(compared), (prefix, row)
            assert len(full) == len(row) + 1 and all(c in full for c in row), (prefix, row)
        assert "seeds that way" not in body and "Terms:" not in body, prefix
        if not declared:  # no family: one line, no table and no interval note
            assert body.startswith("No declared family") and "\n" not in body, prefix
    assert not any(f.endswith("_headline.md") for f in got)  # the notes stay on the pages
    for name in ("seed_veto", "beyond_tie"):  # each rule worded once, with the studies it decides
        assert readme.count(f"- rule `{name}`") == 1, name
    assert "It decides `demo_confirm` (looks at 8, 12, 16, 20 seeds) look by look" in got[readme_results.RULES_BLOCK]


def test_the_readme_table_drops_only_the_descriptive_column(tmp_path) -> None:
    """A study's README rows are its headline rows less the 'seeds that way' cell; a study without a
    family gets one line."""
    prefix = "results/x/summary"
    (tmp_path / "results/x").mkdir(parents=True)
    (tmp_path / f"{prefix}_findings.json").write_text(json.dumps({"family": "f.yaml", "tables": []}))
    (tmp_path / f"{prefix}_headline.md").write_text(
        "Declared family `f.yaml`: 1 comparison.\n\n| comparison | Δ | seeds that way | verdict |\n"
        "|---|---|---|---|\n| `x/a` | +1.0 | 3 of 3 above +0.1 | ahead \\| or not |\n\nΔ: the notes."
    )
    assert study_results(f"{prefix}_findings.json", tmp_path) == (
        "Declared family `f.yaml`: 1 comparison.\n\n| comparison | Δ | verdict |\n|---|---|---|\n"
        "| `x/a` | +1.0 | ahead \\| or not |"
    )
    rows = [{"per_seed": [{}]}, {"per_seed": [{}]}]
    (tmp_path / f"{prefix}_findings.json").write_text(
        json.dumps({"family": None, "baseline": "x/b", "tables": [{"name": "test", "rows": rows}]})
    )
    assert study_results(f"{prefix}_findings.json", tmp_path) == (
        "No declared family: its 2 comparisons against `x/b` are descriptive, one seed each (no test, no interval)."
    )


def test_a_studys_verdicts_in_one_line_follow_its_headline(tmp_path) -> None:
    """The README's first results line: the across study's declared verdict cells, after where its plan
    stands while it is interim; each comparison's Δ on each test set from the by-test-set table beside it."""
    headline = tmp_path / "results" / "x" / "summary_headline.md"
    headline.parent.mkdir(parents=True)
    table = (
        "| comparison | measure | Δ | decided at | verdict (declared) |\n|---|---|---|---|---|\n"
        "| `x/a` | test set (BLEU) | +1.0 | look 2 | ahead across the declared test sets (t, n) |\n"
        "| `x/b` | test set (BLEU) | -0.1 | look 2 | inconclusive |\n\nBy test set (each set's own row):\n\n"
        "| comparison | test set | Δ [95% interval] | p |\n|---|---|---|---|\n"
        "| `x/a` | t | +1.0 [+0.5, +1.5] | 0.01 |\n| `x/a` | n | +0.8 [+0.1, +1.5] | 0.04 |\n"
        "| `x/b` | t | -0.1 [-0.5, +0.3] | 0.6 |\n| `x/b` | n | +0.2 [-0.1, +0.5] | 0.3 |\n\nΔ: notes\n"
    )
    headline.write_text("Declared family `f.yaml`: 2 comparisons.\n\n" + table)
    said = (
        "`x/a`: ahead across the declared test sets (t, n) (Δ BLEU by test set: t +1.0, n +0.8); "
        "`x/b`: inconclusive (Δ BLEU by test set: t -0.1, n +0.2)."
    )
    assert verdicts_line("x", tmp_path) == said
    headline.write_text("**Interim: look 1 of 4 not reached (5 of its 8 seeds).** Worded at a look.\n\n" + table)
    assert verdicts_line("x", tmp_path) == "**Interim: look 1 of 4 not reached (5 of its 8 seeds).** " + said
    stopped = (
        "Declared family `f.yaml`: ..., 2 decided; stopped at look 3 of 4 (16 seeds, every comparison decided).\n\n"
    )
    headline.write_text(stopped + table)
    assert verdicts_line("x", tmp_path) == "**Stopped at look 3 of 4 (16 seeds, every comparison decided).** " + said


def test_the_results_index_lists_every_study_page() -> None:
    """Issue 77: results/README.md listed three of the four study pages; `check` fails on one it omits."""
    index = text("results/README.md")
    assert readme_results.unlisted_pages(index) == []
    omitted = index.replace("](demo_confirm/README.md)", "](demo/README.md)")
    assert readme_results.unlisted_pages(omitted) == ["results/README.md does not list results/demo_confirm/README.md"]


def test_each_studys_pages_are_compare_pys_as_it_recorded_writing_them() -> None:
    """results/<study>/.harness_written.json (tracked) records the pages compare.py wrote; a page merged or
    edited in without compare.py writing it would make the next `compare.py --overwrite` there (the
    study runner's, a user's) refuse it ("edited since compare.py wrote it") and leave runs uncommitted."""
    from utils.files import is_unchanged_output

    records = sorted((ROOT / "results").glob("*/.harness_written.json"))
    assert len(records) >= 4  # demo, demo_confirm, length, demo_across
    stale = [
        page.relative_to(ROOT).as_posix()
        for record in records
        for page in sorted(record.parent.glob("summary*"))
        if not is_unchanged_output(page, "compare.py")
    ]
    assert stale == [], f"recompute them with compare.py --overwrite (the study page says how): {stale}"
