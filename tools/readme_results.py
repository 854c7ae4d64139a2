#!/usr/bin/env python
"""The README's results are compare.py's output, verbatim.

Each study's tables and findings are written by compare.py from the archived runs in results/
(`<prefix>.md`, `<prefix>_findings.md`, ... beside the runs) and copied into README.md between
markers:

    <!-- generated from results/demo/summary.md by `make readme`; do not edit this block -->
    ...the file...
    <!-- end of results/demo/summary.md -->

  python tools/readme_results.py render     # README blocks <- committed files   (make readme)
  python tools/readme_results.py recompute  # committed files <- compare.py on results/ (make results)
  python tools/readme_results.py check      # README blocks == committed files (the test suite does this)
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

# (output prefix, run folders, baseline, declared headline family): one compare.py call per study;
# a study without a family file (the joined-pair arm, the one-seed report size) is descriptive only
STUDIES = [
    ("results/demo/summary", "results/demo/*", None, "configs/demo/findings/headline.yaml"),
    ("results/length/summary", "results/length/*", None, "configs/length/findings/headline.yaml"),
    ("results/length/concat_summary", "results/length/*_concat*", "length/sinusoidal_concat", None),
    ("results/report/length/summary", "results/report/length/*", None, None),
    ("results/report/length/concat_summary", "results/report/length/*_concat*", "length/sinusoidal_concat", None),
]
# Blocks generated from code rather than from a file: the config keys' roles, from the schema.
def _key_roles_table() -> str:
    from utils.key_roles import roles_markdown

    return roles_markdown()


GENERATED = {"utils/key_roles.py": _key_roles_table}
COMPARED = (".md", "_findings.md", "_findings.json", "_headline.md", ".json", ".csv")  # the plots are not compared byte for byte
BLOCK = re.compile(r"<!-- generated from (?P<file>\S+) by `make readme`; do not edit this block -->\n"
                   r"(?:(?P<body>.*?)\n)?<!-- end of (?P=file) -->", re.DOTALL)


def blocks(readme: str) -> list[tuple[str, str]]:
    """(file, body) of every generated block of the README."""
    return [(m["file"], m["body"] or "") for m in BLOCK.finditer(readme)]


def source_text(file: str, root: Path = ROOT) -> str:
    """What a block generated from `file` holds: the file's text, or what GENERATED makes of it."""
    return GENERATED[file]() if file in GENERATED else (root / file).read_text(encoding="utf-8")


def render(readme: str, root: Path = ROOT) -> str:
    """The README with every generated block replaced by its file's current text."""
    return BLOCK.sub(lambda m: _block(m["file"], source_text(m["file"], root)), readme)


def _block(file: str, text: str) -> str:
    return (f"<!-- generated from {file} by `make readme`; do not edit this block -->\n"
            f"{text.rstrip(chr(10))}\n<!-- end of {file} -->")


def stale_blocks(readme: str, root: Path = ROOT) -> list[str]:
    """The generated blocks whose text differs from their file (with a short diff)."""
    out = []
    for file, body in blocks(readme):
        want = source_text(file, root).rstrip("\n")
        if body != want:
            diff = list(difflib.unified_diff(want.splitlines(), body.splitlines(), file, "README.md", lineterm="", n=0))
            out.append("\n".join(diff[:12]))
    return out


def recompute(out_root: Path) -> None:
    """compare.py on the archived runs of every study, writing its files under out_root."""
    import contextlib
    import io
    import os

    import compare

    os.chdir(ROOT)  # the run globs, and the run paths written into the summaries, are relative to it
    for prefix, runs, baseline, family in STUDIES:
        out = out_root / prefix
        args = [runs, "--output", str(out)] + (["--baseline", baseline] if baseline else []) + \
            (["--family", family] if family else [])
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # the tables are in the files; print only progress
            rc = compare.main(args)
        if rc != 0:
            raise SystemExit(f"error: compare.py {' '.join(args)} failed")
        print(f"compare.py {' '.join(args)}: done")


def changed_files(fresh_root: Path) -> list[str]:
    out = []
    for prefix, *_ in STUDIES:
        for suffix in COMPARED:
            committed, fresh = ROOT / f"{prefix}{suffix}", fresh_root / f"{prefix}{suffix}"
            if not committed.is_file() or committed.read_bytes() != fresh.read_bytes():
                out.append(f"{prefix}{suffix}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["render", "recompute", "check"])
    parser.add_argument("--recompute", action="store_true", help="check: also recompute the files from the runs")
    args = parser.parse_args(argv)
    readme_path = ROOT / "README.md"
    if args.action == "recompute":
        recompute(ROOT)
        return 0
    if args.action == "render":
        readme_path.write_text(render(readme_path.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"rendered {len(blocks(readme_path.read_text(encoding='utf-8')))} blocks into README.md")
        return 0
    failures = [f"README.md block differs from its file:\n{d}" for d in stale_blocks(readme_path.read_text("utf-8"))]
    if args.recompute:
        with tempfile.TemporaryDirectory() as tmp:
            recompute(Path(tmp))
            failures += [f"{f} differs from what compare.py writes from the runs now (make results)"
                         for f in changed_files(Path(tmp))]
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    if not failures:
        print("README results blocks and the committed summaries agree" + (" with the runs" if args.recompute else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
