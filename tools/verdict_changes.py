"""Every verdict that changed between the committed findings of an earlier commit and the findings now
(results/**/*_findings.json): one markdown row per comparison whose verdict differs, with both
verdicts; rows only one side has, with a verdict, are listed as added or gone. A verdict is what the rule words
("ahead"/"behind", "equivalent within ±m", both, "inconclusive", withheld while interim or without a
declaring commit), not the numbers: a descriptive row stays descriptive however its interval moves.

  python tools/verdict_changes.py 581bd1d          # against the findings committed at 581bd1d
  python tools/verdict_changes.py --exploratory    # declared verdict -> the current rule's reading, now
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from utils.markdown import table_head, table_row  # noqa: E402


def verdict_of(row: dict) -> str:
    """The verdict a committed row states (findings before `outcome` existed: read from the wording)."""
    said = row.get("outcome")
    if said is None:
        finding = row.get("finding") or ""
        said = "direction" if finding.startswith(("ahead", "behind")) else "descriptive"
    if said in ("direction", "both"):
        return row["finding"].split(" (Holm", 1)[0] + (" and equivalent" if said == "both" else "")
    return said


def verdicts(files: dict[str, str]) -> dict[tuple, str]:
    """{(findings file, table, config, compared on): verdict} of every row."""
    out = {}
    for name, text in files.items():
        for table in json.loads(text)["tables"]:
            for r in table["rows"]:
                out[(name, table["name"], r["config"], r["compared_on"])] = verdict_of(r)
    return out


def committed(commit: str) -> dict[str, str]:
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit, "results/"], cwd=ROOT, capture_output=True, text=True
    )
    if listed.returncode != 0:
        raise SystemExit(f"error: git ls-tree {commit}: {listed.stderr.strip()}; give a commit of this repository")
    names = [n for n in listed.stdout.splitlines() if n.endswith("_findings.json")]
    return {
        n: subprocess.run(["git", "show", f"{commit}:{n}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for n in names
    }


def now() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("results/**/*_findings.json"))
    }


QUIET = {None, "descriptive", "not tested"}  # no verdict either way: a row added or gone without one is no change


def changes(before: dict[tuple, str], after: dict[tuple, str]) -> list[str]:
    """The markdown table of the rows whose verdict differs."""
    lines = table_head(["findings", "table", "config", "compared on", "before", "after"])
    for key in sorted(set(before) | set(after)):
        old: Optional[str] = before.get(key)
        new: Optional[str] = after.get(key)
        if old != new and not {old, new} <= QUIET:
            lines.append(table_row([*key, old or "(no row)", new or "(no row)"]))
    return lines


def exploratory(files: dict[str, str]) -> tuple[dict[tuple, str], dict[tuple, str]]:
    """({key: declared verdict}, {key: the current rule's exploratory verdict}) of every declared row of
    a family declared under an older rule (study/stats/rules.py) whose outcome the current rule changes."""
    declared, current = {}, {}
    for name, text in files.items():
        for table in json.loads(text)["tables"]:
            for r in table["rows"]:
                if r.get("exploratory") and r["exploratory"].get("outcome") != r.get("outcome"):
                    # the same outcome is the same verdict (a direction's sign is the mean's under both
                    # rules), however each rule words it
                    key = (name, table["name"], r["config"], r["compared_on"])
                    declared[key], current[key] = verdict_of(r), verdict_of(r["exploratory"])
    return declared, current


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", nargs="?", help="the earlier commit whose committed findings are the 'before'")
    parser.add_argument(
        "--exploratory",
        action="store_true",
        help="list the declared rows whose verdict the current rule would change (before: declared, after: "
        "exploratory), from the findings now",
    )
    args = parser.parse_args(argv)
    if args.exploratory == (args.commit is not None):
        parser.error("give a commit, or --exploratory (not both)")
    lines = (
        changes(*exploratory(now())) if args.exploratory else changes(verdicts(committed(args.commit)), verdicts(now()))
    )
    print("\n".join(lines))
    print(f"\n{len(lines) - 2} verdicts changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
