"""The study as typed records (study/records.py, issue 68): records are frozen, a stage returns new
ones and leaves its inputs as they were, and study/'s production code writes into no mapping in
place nor passes dicts between functions (two AST checks, tools/code_measures.py's counters, each
checked on a small module of its own first)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from study.read.run_groups import add_seed_wins, mark_baseline
from study.records import Configuration, RunRecord, Stats, frozen_map
from tools.code_measures import dict_signatures, keyed_writes

STUDY = Path(__file__).resolve().parents[2] / "study"  # and its layers, each a package (read recursively)
# Modules exempt from both checks while they still pass dicts between functions (issue 68 part 2):
# none since the findings' rows, tables and readings are records (stage b); the list can only shrink.
NOT_YET_RECORDS: dict[str, str] = {}


def findings_in(root: Path, find) -> list[str]:
    """'module:line what' of each finding of `find` in the production modules under `root`."""
    return [
        f"{path.relative_to(root).as_posix()}:{line} {what}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).as_posix() not in NOT_YET_RECORDS
        for line, what in find(ast.parse(path.read_text(encoding="utf-8")))
    ]


def test_the_checks_find_a_keyed_write_and_a_dict_signature(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def f(rows: list[dict]) -> int:\n    rows[0]['p'] = 1\n    rows[0].update(q=2)\n    return 0\n"
        "def g(row: 'Optional[dict]') -> None:\n    row.setdefault(1, 2)\n"
        "def h(rows: tuple[int, ...]) -> int:\n    scratch = {}\n    scratch[rows[0]] = 1\n    return len(scratch)\n",
        encoding="utf-8",
    )
    assert findings_in(tmp_path, keyed_writes) == ["m.py:2 ['p'] =", "m.py:3 .update()", "m.py:6 .setdefault()"]
    assert findings_in(tmp_path, dict_signatures) == ["m.py:1 f", "m.py:5 g"]


def test_study_writes_into_no_mapping_in_place() -> None:
    assert findings_in(STUDY, keyed_writes) == []


def test_no_study_function_takes_or_returns_a_dict() -> None:
    assert findings_in(STUDY, dict_signatures) == []


def test_the_exemptions_name_modules_that_exist_and_still_need_them() -> None:
    for name in NOT_YET_RECORDS:
        tree = ast.parse((STUDY / name).read_text(encoding="utf-8"))
        assert keyed_writes(tree) or dict_signatures(tree), f"{name} needs no exemption: remove it"


def runs(label: str, *scores: tuple[int, float]) -> tuple[RunRecord, ...]:
    return tuple(RunRecord(run=f"{label}_{s}", seed=s, scores=frozen_map({"sacrebleu": b})) for s, b in scores)


def test_records_are_frozen() -> None:
    run = RunRecord(run="r", seed=1)
    group = Configuration((run,), "rope", stats=frozen_map({"sacrebleu": Stats(1.0, None, 1)}))
    for record, field in ((run, "seed"), (group, "p_value"), (Stats(1.0, None), "mean")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, 2)
    with pytest.raises(TypeError):  # a record's mapping is read-only too
        group.stats["sacrebleu"] = Stats(2.0, None)  # type: ignore[index]


def test_a_stage_returns_new_records_and_leaves_its_inputs_unchanged() -> None:
    def made() -> list[Configuration]:
        return [Configuration(runs("base", (1, 20.0), (2, 25.0)), "base"), Configuration(runs("x", (1, 21.0)), "x")]

    groups = made()
    marked = mark_baseline(groups, groups[0])
    won = add_seed_wins(marked, marked[0])
    assert [g.is_baseline for g in won] == [True, False] and won[1].seeds_above == (1, 1)
    assert groups == made() and marked == mark_baseline(made(), made()[0]) and marked[1].seeds_above is None
