"""The README's results blocks (tools/readme_results.py renders them): per study page, its declared
comparisons in one short table (`study_results`: the headline's lines above its table and the table less
its descriptive column, from `<prefix>_headline.md`, which compare.py wrote), and once, in the README's
glossary, the rules and the tests the studies were decided by (`rules_glossary`, from their findings);
a study page's sweep commands from its archive (`archived_commands`); the across study's verdicts in the
README's first results line (`verdicts_line`).
The notes under each headline table stay on the study pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

DESCRIPTIVE_COLUMN = "seeds that way"  # the headline's descriptive column, left to the study page


def study_name(prefix: str) -> str:
    """A study's name as its folder under results/ spells it (`demo`, `report/length`)."""
    return prefix.removeprefix("results/").rsplit("/", 1)[0]


def _findings(prefix: str, root: Path) -> dict:
    return json.loads((root / f"{prefix}_findings.json").read_text(encoding="utf-8"))


def cells(line: str) -> list[str]:
    """A markdown table row's cells as written (an escaped `\\|` stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def first_table(lines: list[str]) -> tuple[int, int]:
    """(first, end) line numbers of a page's first markdown table (a headline's declared comparisons)."""
    first = next(n for n, line in enumerate(lines) if line.startswith("|"))
    return first, next((n for n in range(first, len(lines)) if not lines[n].startswith("|")), len(lines))


def study_results(findings_file: str, root: Path) -> str:
    """A study's declared comparisons for the README: the headline's lines above its table (the family, how
    it was decided, what it found) and the table without its descriptive column; the notes under it are the
    glossary's. A study without a family: one line saying so."""
    prefix = findings_file.removesuffix("_findings.json")
    findings = _findings(prefix, root)
    if not findings.get("family"):
        rows = [r for t in findings["tables"] if t["name"] == "test" for r in t["rows"]]
        seeds = ", one seed each (no test, no interval)" if rows and all(len(r["per_seed"]) <= 1 for r in rows) else ""
        return (
            f"No declared family: its {len(rows)} comparisons against `{findings['baseline']}` are descriptive{seeds}."
        )
    lines = (root / f"{prefix}_headline.md").read_text(encoding="utf-8").splitlines()
    first, end = first_table(lines)
    table = [cells(line) for line in lines[first:end]]
    keep = [i for i, title in enumerate(table[0]) if not title.startswith(DESCRIPTIVE_COLUMN)]
    rows = ["| " + " | ".join(row[i] for i in keep) + " |" for row in table]
    return "\n".join([*lines[:first], rows[0], "|" + "---|" * len(keep), *rows[2:]])


def rules_glossary(prefixes: list[str], root: Path) -> str:
    """The rules the studies' declared comparisons were decided by, each once with the studies it decides
    (a sequential plan: by its boundaries) and those it reads exploratory, then the seed test and the
    equivalence test, each with its studies: from their findings."""
    from study.stats.rules import CURRENT

    texts: dict[str, str] = {}
    said: dict[str, dict[str, list[str]]] = {}
    tests: dict[str, list[str]] = {}
    for prefix in prefixes:
        findings = _findings(prefix, root)
        if not findings.get("family"):
            continue
        study = f"`{study_name(prefix)}`"
        rule, other, plan = findings["decision_rule"], findings.get("exploratory_rule"), findings.get("sequential")
        for r, role in ((rule, "sequential" if plan else "decides"), (other, "exploratory")):
            if r:
                texts.setdefault(r["name"], r["text"])
                looks = f" (looks at {', '.join(map(str, plan['looks']))} seeds)" if plan and r is rule else ""
                said.setdefault(r["name"], {}).setdefault(role, []).append(study + looks)
        for key in ("test", "equivalence_test"):
            tests.setdefault(findings[key], []).append(study)
    words = {
        "decides": "It decides {}.",
        "sequential": "It decides {} look by look: each p unadjusted against its boundary at the look, which the "
        "plan's α spending and the comparisons already decided set, in place of the Holm-adjusted p against α.",
        "exploratory": "Its reading of {} is exploratory (read after their runs, beside the declared verdict).",
    }
    lines = []
    for name, text in texts.items():
        current = " (the current rule)" if name == CURRENT.name else ""
        roles = " ".join(words[role].format(", ".join(studies)) for role, studies in said[name].items())
        lines.append(f"- rule `{name}`{current}: {text}. {roles}")
    lines += [f"- {text} ({', '.join(studies)})." for text, studies in tests.items()]
    return "\n".join(lines)


def archived_commands(study: str, root: Path) -> str:
    """The sweep commands that give exactly the runs archived under results/<study>/ (a study whose runner
    adds a run at a time: its page's commands follow the archive), one per configuration: its own seed's
    run, then the other seeds it holds."""
    from utils import run_files

    family = f"configs/{study}/findings/headline.yaml"
    lines = []
    for config in sorted((root / "configs" / study).glob("*.yaml")):
        runs = {p.name for p in (root / "results" / study).glob(f"{config.stem}*") if (p / run_files.CONFIG).is_file()}
        seeds = sorted(int(r.rsplit("_seed", 1)[1]) for r in runs if r.startswith(f"{config.stem}_seed"))
        command = f"python sweep.py configs/{study}/{config.name} --family {family}"
        lines += [command] if config.stem in runs else []
        lines += [f"{command} --seeds {' '.join(map(str, seeds))}"] if seeds else []
    return "\n".join(["```bash", *lines, "```"])


def verdicts_line(study: str, root: Path) -> str:
    """A study's declared verdicts in one line (the README's first results line): where its plan stands
    (interim: the headline's first sentence; a sequential plan that stopped: the look it stopped at), then
    each declared comparison's verdict cell with its Δ on each test set a claim across sets spans (the by-test-set
    table: what the verdict is about, whatever it is), from results/<study>/summary_headline.md as compare.py
    wrote it."""
    lines = (root / "results" / study / "summary_headline.md").read_text(encoding="utf-8").splitlines()
    first, end = first_table(lines)
    table = [cells(line) for line in lines[first:end]]
    at = table[0].index("comparison"), next(i for i, t in enumerate(table[0]) if t.startswith("verdict"))
    by_set, measure = _by_set(lines[end:]), table[0].index("measure")

    def sets(row: list[str]) -> str:  # (its unit: the measure cell's, e.g. "test set tatoeba (BLEU)")
        unit = re.search(r"\(([^,)]*)", row[measure])
        deltas = by_set.get(row[at[0]])
        return f" (Δ{f' {unit[1]}' if unit else ''} by test set: {', '.join(deltas)})" if deltas else ""

    said = "; ".join(f"{row[at[0]]}: {row[at[1]]}{sets(row)}" for row in table[2:])
    interim = re.match(r"\*\*Interim: [^*]*\*\*", lines[0])
    stopped = next((m for m in map(re.compile(r"; stopped at (look \d+ of \d+ \([^)]*\))").search, lines) if m), None)
    where = interim[0] if interim else f"**Stopped at {stopped[1]}.**" if stopped else ""
    return f"{where} {said}.".lstrip()


def _by_set(lines: list[str]) -> dict[str, list[str]]:
    """{comparison: ["a +0.9", "b +0.3"]}: each set's Δ from a headline's by-test-set table (none: {})."""
    start = next((n for n, line in enumerate(lines) if line.startswith("By test set")), None)
    if start is None:
        return {}
    first, end = first_table(lines[start:])
    rows = [cells(line) for line in lines[start + first + 2 : start + end]]
    deltas: dict[str, list[str]] = {}
    for comparison, name, delta, *_ in rows:
        deltas.setdefault(comparison, []).append(f"{name} {delta.split(' ')[0]}")
    return deltas
