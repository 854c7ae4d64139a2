"""An archived study read back for the simulations (study/simulate/): the declared sacreBLEU rows of
its findings JSON (`summary_findings.json`, as compare.py wrote it) and their tie margin."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from study.read.run_files_read import from_json
from study.records import JsonObject
from study.terms import Measure, Table


@dataclass(frozen=True)
class DeclaredRow:
    """A declared row as the simulation reads it: its name ("config, compared on"), observed mean, seed
    SD s_d, shared and per-seed test-set noise, and its table."""

    name: str
    mean: float
    seed_sd: float
    v_shared: float
    v_int: float
    table: str = ""


@dataclass(frozen=True)
class ArchivedSeedTest:  # study/stats/seed_test.SeedTest as written
    mean: float
    seed_sd: float
    v_shared: Optional[float] = None  # None (and v_int): archived before the test-set noise was written
    v_int: Optional[float] = None


@dataclass(frozen=True)
class ArchivedRow:
    config: str
    compared_on: str
    declared: bool = False
    seed_test: Optional[JsonObject] = None  # None: no seed test (a row with one seed)


@dataclass(frozen=True)
class ArchivedTable:
    name: str
    metric: str
    rows: tuple[JsonObject, ...] = ()


@dataclass(frozen=True)
class ArchivedFindings:
    tables: tuple[JsonObject, ...]
    tie_margin: Mapping[str, float]  # unit -> margin


def declared_rows(findings_path: Path) -> tuple[list[DeclaredRow], float]:
    """The declared sacreBLEU rows of a findings JSON and their tie margin."""
    findings = from_json(ArchivedFindings, json.loads(Path(findings_path).read_text(encoding="utf-8")))
    rows = []
    for t in (from_json(ArchivedTable, t) for t in findings.tables):
        for r in (from_json(ArchivedRow, r) for r in t.rows):
            if not (r.declared and t.metric == Measure.SACREBLEU and r.seed_test):
                continue
            s = from_json(ArchivedSeedTest, r.seed_test)
            if s.v_shared is not None:
                name = f"{r.config}, {r.compared_on}"
                rows.append(DeclaredRow(name, s.mean, s.seed_sd, s.v_shared, s.v_int, t.name))
    return rows, findings.tie_margin[Measure.SACREBLEU]


def rows_on_test_set(rows: Sequence[DeclaredRow]) -> list[DeclaredRow]:
    """The rows compared on the whole test set: those of its table."""
    return [r for r in rows if r.table == Table.TEST]
