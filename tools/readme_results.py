#!/usr/bin/env python
"""The results in the README and in each study's page are compare.py's output, verbatim.

Each study's tables and findings are written by compare.py from the archived runs in results/
(`<prefix>.md`, `<prefix>_findings.md`, ... beside the runs) and copied between markers into the
study's page, results/<study>/README.md (tables, findings, plots and the method text of that
study). README.md holds, per page, its declared comparisons in one short table (`study_results`, from
`<prefix>_findings.json` and the headline table) and, once, the rules and the seed test they were decided
by (`rules_glossary`):

    <!-- generated from results/demo/summary.md by `make readme`; do not edit this block -->
    ...the file...
    <!-- end of results/demo/summary.md -->

The text around the blocks is hand-written and explains method only: `check` fails on a metric
figure, a verdict word or a claim of how far a study got there (RESULT_TEXT, METHOD_LINES), on an
exploratory reading that says "declared" or a sequential row with a fixed design's figure
(tools/page_claims.py), and on a study page the results index does not list.

  python tools/readme_results.py render     # README + study page blocks <- committed files  (make readme)
  python tools/readme_results.py recompute  # committed files <- compare.py on results/ (make results)
  python tools/readme_results.py check      # blocks == committed files, no hand-written result, links resolve
                                            #   (the test suite does this: tests/tools/test_readme_results.py)
  python tools/readme_results.py check --recompute   # and committed files == compare.py now (make results-check)
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.readme_study_blocks import archived_commands, rules_glossary, study_results, verdicts_line  # noqa: E402

# (output prefix, run folders, baseline, declared headline family): one compare.py call per study;
# a study without a family file (the joined-pair arm, the one-seed report size) is descriptive only
STUDIES = [
    ("results/demo/summary", "results/demo/*", None, "configs/demo/findings/headline.yaml"),
    ("results/length/summary", "results/length/*", None, "configs/length/findings/headline.yaml"),
    ("results/demo_confirm/summary", "results/demo_confirm/*", None, "configs/demo_confirm/findings/headline.yaml"),
    ("results/demo_across/summary", "results/demo_across/*", None, "configs/demo_across/findings/headline.yaml"),
    ("results/length/concat_summary", "results/length/*_concat*", None, None),  # (default: sinusoidal_concat)
    ("results/report/length/summary", "results/report/length/*", None, None),
    ("results/report/length/concat_summary", "results/report/length/*_concat*", "length/sinusoidal_concat", None),
]
# The study pages: each holds the tables and findings of these prefixes (the first one's tables, every
# one's findings), its plots and the method text belonging to it; README.md holds each page's declared
# comparisons (a block of the first prefix's _findings.json: `study_results`) and a link to it.
PAGES = {
    "results/demo/README.md": ("results/demo/summary",),
    "results/length/README.md": ("results/length/summary", "results/length/concat_summary"),
    "results/demo_confirm/README.md": ("results/demo_confirm/summary",),
    "results/demo_across/README.md": ("results/demo_across/summary",),
    "results/report/length/README.md": ("results/report/length/summary", "results/report/length/concat_summary"),
}
README = "README.md"
# Where a result may be stated only inside generated blocks: the README's "## Results" section, the
# results index (the method shared by the studies) and every study page.
RESULT_TEXT = (README, "results/README.md", *PAGES)
DOCUMENTS = (README, "results/README.md", *PAGES)  # the files with generated blocks
# The decision rules' calibration by simulation of the demo's family (study/simulate/calibration.py), in
# results/README.md: recomputed from the demo's findings with them
CALIBRATION = "results/calibration.md"
# The confirmatory demo's sequential plan calibrated by simulation (study/simulate/sequential_calibration.py)
# at the twenty-seed demo's rows, on its page
SEQUENTIAL_CALIBRATION = "results/demo_confirm/sequential_calibration.md"
SEQUENTIAL_FAMILY = "configs/demo_confirm/findings/headline.yaml"


# Blocks generated from code rather than from a file: the config keys' roles, from the schema.
def _key_roles_table() -> str:
    """The config keys' roles and their keys as a markdown table, from the schema."""
    from settings.key_roles import default_option_role, schema_roles
    from settings.schema import ROLES
    from utils.markdown import table_head, table_row

    by_role: dict[str, list[str]] = {}
    for key, role in schema_roles().items():
        by_role.setdefault(role, []).append(key)
    yes = {True: "yes", False: "no"}
    lines = [
        *table_head(
            [
                "role",
                "a resume may change it",
                "test.py / inference.py `--set` may change it",
                "tells configurations apart (compare.py)",
                "keys",
            ]
        )
    ]
    for role, (resume, test, groups) in ROLES.items():
        keys = by_role.get(role, [])
        sections = {k.split(".")[0] for k in keys if "." in k}
        shown = [
            f"`{s}.*`"
            for s in sorted(sections)
            if all(r == role for k, r in schema_roles().items() if k.startswith(s + "."))
        ]
        shown += [f"`{k}`" for k in keys if "." not in k or f"`{k.split('.')[0]}.*`" not in shown]
        lines.append(table_row([role, yes[resume], yes[test], yes[groups], ", ".join(shown)]))
    return "\n".join(lines) + (
        f"\n\nAn encoding's options are {default_option_role()} keys unless its `Options` field declares "
        "another role (SHAPE's `inference_shift` is an inference key)."
    )


def _gpu_figures() -> str:
    """The GPU bullets, from the benchmark files (benchmarks/figures.py: a script folder, loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_figures", ROOT / "benchmarks" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.gpu_figures()


GENERATED = {
    "settings/key_roles.py": _key_roles_table,
    "benchmarks/figures.py": _gpu_figures,
    "results/demo_across/*/config.yaml": lambda: archived_commands("demo_across", ROOT),
    "results/demo_across/summary_headline.md#verdicts": lambda: verdicts_line("demo_across", ROOT),
}
# The README's glossary block: the rules and the tests the studies were decided by (tools/readme_study_blocks.py)
RULES_BLOCK = "study/stats/rules.py"


COMPARED = (
    ".md",
    "_findings.md",
    "_findings.json",
    "_headline.md",
    "_provenance.md",
    ".json",
    ".csv",
)  # the plots are not compared byte for byte
BLOCK = re.compile(
    r"<!-- generated from (?P<file>\S+) by `make readme`; do not edit this block -->\n"
    r"(?:(?P<body>.*?)\n)?<!-- end of (?P=file) -->",
    re.DOTALL,
)


def blocks(readme: str) -> list[tuple[str, str]]:
    """(file, body) of every generated block of the README."""
    return [(m["file"], m["body"] or "") for m in BLOCK.finditer(readme)]


def source_text(file: str, root: Path = ROOT) -> str:
    """What a block generated from `file` holds: the file's text, or what GENERATED, `study_results` (a
    study's findings in the README) or `rules_glossary` makes of it."""
    if file in GENERATED:
        return GENERATED[file]()
    if file == RULES_BLOCK:
        return rules_glossary([prefixes[0] for prefixes in PAGES.values()], root)
    if file.endswith("_findings.json"):
        return study_results(file, root)
    return (root / file).read_text(encoding="utf-8")


def render(readme: str, root: Path = ROOT) -> str:
    """The README with every generated block replaced by its file's current text."""
    return BLOCK.sub(lambda m: _block(m["file"], source_text(m["file"], root)), readme)


def _block(file: str, text: str) -> str:
    return (
        f"<!-- generated from {file} by `make readme`; do not edit this block -->\n"
        f"{text.rstrip(chr(10))}\n<!-- end of {file} -->"
    )


def stale_blocks(text: str, root: Path = ROOT, name: str = README) -> list[str]:
    """The generated blocks of a document whose text differs from their file (with a short diff)."""
    out = []
    for file, body in blocks(text):
        want = source_text(file, root).rstrip("\n")
        if body != want:
            diff = list(difflib.unified_diff(want.splitlines(), body.splitlines(), file, name, lineterm="", n=0))
            out.append("\n".join(diff[:12]))
    return out


def missing_blocks(texts: dict[str, str]) -> list[str]:
    """The blocks a document lacks: each page its tables, findings and result sentences, the README
    each page's declared comparisons, a link to the page and the rules' glossary."""
    readme_files = {f for f, _ in blocks(texts[README])}
    out = [] if RULES_BLOCK in readme_files else [f"{README} has no block of {RULES_BLOCK}"]
    for page, prefixes in PAGES.items():
        files = {f for f, _ in blocks(texts[page])}
        wanted = [
            f"{prefixes[0]}.md",
            f"{prefixes[0]}_headline.md",
            f"{prefixes[0]}_provenance.md",
            *(f"{p}_findings.md" for p in prefixes),
        ]
        out += [f"{page} has no block of {f}" for f in wanted if f not in files]
        if f"{prefixes[0]}_findings.json" not in readme_files:
            out.append(f"{README} has no block of {prefixes[0]}_findings.json")
        if f"]({page})" not in texts[README]:
            out.append(f"{README} does not link to {page}")
    return out


# What result text may say outside generated blocks: method only. A metric figure (a decimal number
# or a signed one), a verdict word or how far a study got (its runs all in, a goal reached, a plan
# stopped) there is a hand-written result, unless the line is one of these method sentences (data
# facts, settings, definitions), matched by a fragment of the line.
VERDICT_WORDS = re.compile(
    r"\b(significant|ahead|behind|every seed)\b"
    r"|\b(?:runs|seeds) (?:are|were) (?:all )?in\b|\breached it\b|\bstopped at look\b",
    re.IGNORECASE,
)
FIGURE = re.compile(r"(?<![\w.])[+−±]\s?\d|(?<![\w.-])\d+\.\d+(?![\w.])")
METHOD_LINES = (
    "Student's t with n − 1 degrees of freedom",
    "only when it is declared, its Holm-adjusted p is below 0.05",  # the rule itself
    "worded as a direction only when it is declared",
    "difference lies beyond the tie margin (0.1 BLEU, 0.01 nats)",
    "(0.05 nats) effect would need",
    "the smallest effect its seeds can see (80% power",
    "assumes independent, roughly normal seed effects (Dror et al., ACL 2018",
    "what may be called a direction",
    'A declared row is then worded "ahead"/"behind", "equivalent within ±m"',
    "The design's goal is a detectable degradation difference of at most 0.15 nats",  # issue 54's target
    "**What may be called a direction.**",
    'a declared comparison is worded "ahead/behind by more than the tie margin"',  # the rule's definition
    "The tie margin (`tie_margin`: 0.1 BLEU, 0.01 nats)",
    "or on an edge of the tie margin in at most 2.5% of studies",  # the calibrations' bounds
    "covers the true difference in 93.5–96.5% of studies",
    "- **verdict**: ahead or behind (a direction)",  # the glossary
    "a high peak learning rate (2e-3)",
    "length-bucketed 1,500-token batches (0.1% padding)",
    "pre-norm, tied",
    "power 0.99 / 0.94 for the observed learnable / RoPE differences",  # fe14428's message, quoted
    "48.2M parameters (48.5M with the learnable table)",
    "rate 7e-4, 800 updates",
    "runs trained side by side (`nvidia-smi`: 100% busy, 83 GB): all ten trained and tested in 5.7",
)


def result_lines(name: str, text: str) -> list[tuple[int, str]]:
    """(line number, text) of a document's result text outside generated blocks, code blocks, tables,
    images and HTML: the README's "## Results" section, the whole of a study page or the results index."""
    lines = text.splitlines()
    start, end = 0, len(lines)
    if name == README:
        start = lines.index("## Results")
        end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("## ")), len(lines))
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


def unlisted_pages(index: str) -> list[str]:
    """The study pages the results index (results/README.md) does not link to."""
    return [
        f"results/README.md does not list {page}"
        for page in PAGES
        if f"]({Path(page).relative_to('results').as_posix()})" not in index
    ]


def hand_written_results(text: str, name: str = README) -> list[str]:
    """The lines of result text that state a figure or a verdict by hand (outside generated blocks)."""
    return [
        f"{name}:{n}: {line}"
        for n, line in result_lines(name, text)
        if (VERDICT_WORDS.search(line) or FIGURE.search(line)) and not any(m in line for m in METHOD_LINES)
    ]


LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)(?:#[^)]*)?\)")


def broken_links(name: str, text: str, root: Path = ROOT) -> list[str]:
    """Relative links (pages, plots) of a document that name no file or folder."""
    base = (root / name).parent
    return [
        f"{name} links to {target}, which does not exist"
        for target in LINK.findall(text)
        if not (base / target).exists()
    ]


def recompute(out_root: Path) -> None:
    """compare.py on the archived runs of every study, writing its files under out_root."""
    import contextlib
    import io
    import os

    from commands.compare import compare

    os.chdir(ROOT)  # the run globs, and the run paths written into the summaries, are relative to it
    for prefix, runs, baseline, family in STUDIES:
        out = out_root / prefix
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # the tables are in the files; print only progress
            rc = compare([runs], output=str(out), baseline=baseline, family=family, overwrite=True)
        if rc != 0:
            raise SystemExit(f"error: compare.py {runs} --output {out} failed")
        print(f"compare.py {runs} --output {out}: done")
    from study.read.archived import declared_rows
    from study.read.family import load_family
    from study.simulate.calibration import CALIBRATED, calibration_markdown

    rows, tie = declared_rows(out_root / CALIBRATED)
    (out_root / CALIBRATION).write_text(calibration_markdown(rows, tie), encoding="utf-8")
    print(f"{CALIBRATION}: the rules simulated on {CALIBRATED}")
    from study.simulate.sequential_calibration import sequential_calibration_markdown

    text = sequential_calibration_markdown(rows, load_family(str(ROOT / SEQUENTIAL_FAMILY)))
    (out_root / SEQUENTIAL_CALIBRATION).write_text(text, encoding="utf-8")
    print(f"{SEQUENTIAL_CALIBRATION}: {SEQUENTIAL_FAMILY}'s plan simulated on {CALIBRATED}")


def changed_files(fresh_root: Path) -> list[str]:
    names = [f"{prefix}{suffix}" for prefix, *_ in STUDIES for suffix in COMPARED]
    names += [CALIBRATION, SEQUENTIAL_CALIBRATION]
    return [
        name
        for name in names
        if not (ROOT / name).is_file() or (ROOT / name).read_bytes() != (fresh_root / name).read_bytes()
    ]


def settle_summaries(root: Path = ROOT) -> None:
    """The readers' rule for the summary sets the pages copy (utils/publish.settle): one a stopped
    compare.py left half published is finished first, or refused in one line."""
    from utils.publish import settle

    for prefix, *_ in STUDIES:
        settle(root / prefix, "tools/readme_results.py", "compare.py")


def check(root: Path = ROOT) -> list[str]:
    """Everything `check` fails on, without recomputing: stale or missing blocks, hand-written
    results, broken links."""
    settle_summaries(root)
    texts = {name: (root / name).read_text(encoding="utf-8") for name in RESULT_TEXT}
    failures = [
        f"{name} block differs from its file:\n{d}" for name in DOCUMENTS for d in stale_blocks(texts[name], root, name)
    ]
    failures += missing_blocks(texts) + unlisted_pages(texts["results/README.md"])
    failures += [
        f"a result written by hand outside the generated blocks: {line}"
        for name in RESULT_TEXT
        for line in hand_written_results(texts[name], name)
    ]
    failures += [b for name in RESULT_TEXT for b in broken_links(name, texts[name], root)]
    from tools.page_claims import claim_failures

    failures += [
        f"a claim the generated text may not make: {c}" for c in claim_failures(root, [p for p, *_ in STUDIES])
    ]
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["render", "recompute", "check"])
    parser.add_argument("--recompute", action="store_true", help="check: also recompute the files from the runs")
    args = parser.parse_args(argv)
    if args.action == "recompute":
        recompute(ROOT)
        return 0
    if args.action == "render":
        settle_summaries()
        for name in DOCUMENTS:
            path = ROOT / name
            text = render(path.read_text(encoding="utf-8"))
            path.write_text(text, encoding="utf-8")
            print(f"rendered {len(blocks(text))} blocks into {name}")
        return 0
    failures = check()
    if args.recompute:
        with tempfile.TemporaryDirectory() as tmp:
            recompute(Path(tmp))
            failures += [
                f"{f} differs from what compare.py writes from the runs now (make results)"
                for f in changed_files(Path(tmp))
            ]
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    if not failures:
        print(
            "the results blocks of the README and the study pages agree with the committed summaries"
            + (" and with the runs" if args.recompute else "")
        )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
