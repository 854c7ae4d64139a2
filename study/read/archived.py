"""An archived study read back for the simulations (study/simulate/): the declared sacreBLEU rows of
its findings JSON (`summary_findings.json`, as compare.py wrote it) and their tie margin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from study.terms import Measure, Table


@dataclass(frozen=True)
class DeclaredRow:
    """A declared sacreBLEU row of an archived findings JSON, as the simulation reads it: its name
    ("config, compared on"), observed mean, seed SD s_d, shared and per-seed test-set noise, and its
    table."""

    name: str
    mean: float
    seed_sd: float
    v_shared: float
    v_int: float
    table: str = ""


def declared_rows(findings_path: Path) -> tuple[list[DeclaredRow], float]:
    """The declared sacreBLEU rows of a findings JSON (the file, read as JSON) and their tie margin."""
    findings = json.loads(Path(findings_path).read_text(encoding="utf-8"))
    rows = []
    for t in findings["tables"]:
        for r in t["rows"]:
            s = r.get("seed_test")
            if r.get("declared") and t["metric"] == Measure.SACREBLEU and s and s.get("v_shared") is not None:
                name = f"{r['config']}, {r['compared_on']}"
                rows.append(DeclaredRow(name, s["mean"], s["seed_sd"], s["v_shared"], s["v_int"], t["name"]))
    return rows, findings["tie_margin"][Measure.SACREBLEU]


def rows_on_test_set(rows: Sequence[DeclaredRow]) -> list[DeclaredRow]:
    """The rows compared on the whole test set: those of its table."""
    return [r for r in rows if r.table == Table.TEST]
