"""What made each seed of a row (study/read/seed_provenance.py): seeds on different device kinds or
precisions are refused unless --mixed names the difference; a row spanning code versions or devices
is marked ‡ and said under the table; the provenance table lists each seed."""

from __future__ import annotations

import pytest

from study.read.seed_provenance import MixedSeedsError, check_mixed, mark_label, provenance_markdown, spans_note
from study.records import Configuration, Provenance, RunRecord


def run(seed: int, device="cpu", kind="cpu", precision="fp32", code="aaa") -> RunRecord:
    provenance = Provenance((kind,), (device,), (precision,), (code,), ("2026-11-27", "2026-11-28"), ())
    return RunRecord(run=f"rope_seed{seed}", seed=seed, provenance=provenance)


def group(*runs: RunRecord, label: str = "rope", variant: bool = False) -> Configuration:
    return Configuration(runs, label, variant=variant)


def test_seeds_of_other_device_kinds_or_precisions_are_refused_unless_mixed() -> None:
    check_mixed([group(run(1), run(2))], [])
    cuda = group(run(1), run(2, device="H200", kind="cuda"))
    with pytest.raises(MixedSeedsError, match=r"rope ran on different devices .*--mixed device"):
        check_mixed([cuda], [])
    check_mixed([cuda], ["device"])
    with pytest.raises(MixedSeedsError, match="different precisions"):
        check_mixed([group(run(1), run(2, precision="bf16"))], ["device"])


def test_a_row_spanning_code_versions_is_marked_and_said() -> None:
    same, spanning = group(run(1), run(2)), group(run(1), run(2, code="bbb"))
    assert mark_label(same) == "rope" and spans_note([same]) == []
    assert mark_label(spanning) == "rope ‡"
    assert spans_note([spanning]) == ["‡ `rope`: its seeds span code versions (1: cpu, code aaa; 2: cpu, code bbb)."]


def test_the_provenance_table_lists_each_seed_and_skips_variants() -> None:
    table = provenance_markdown([group(run(1)), group(run(1), label="rope ntk4", variant=True)])
    rows = [line for line in table.splitlines() if line.startswith("| rope")]
    assert rows == ["| rope | 1 | cpu | fp32 | aaa | 2026-11-27 to 2026-11-28 | - |"]
