"""tools/test_durations.py: a JUnit XML report summed per test file, longest first, the way
tests/conftest.py reads it; a report it cannot read is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tools.test_durations import module_path, module_seconds

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.tools.test_archive" name="test_a" time="1.25"/>
<testcase classname="tests.tools.test_archive.TestPack" name="test_b" time="2.5"/>
<testcase classname="tests.test_layers" name="test_c" time="9.0"><skipped message="x"/></testcase>
<testcase classname="tests.tools.test_archive" name="test_d" time=""/>
</testsuite></testsuites>
"""


def test_a_class_of_tests_counts_for_its_file() -> None:
    assert module_path("tests.tools.test_archive.TestPack") == "tests/tools/test_archive.py"
    assert module_path("tests.test_layers") == "tests/test_layers.py"


def test_modules_are_summed_and_longest_first(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    seconds = module_seconds(report)
    assert list(seconds.items()) == [("tests/test_layers.py", 9.0), ("tests/tools/test_archive.py", 3.8)]


def test_the_command_writes_the_table_and_refuses_a_bad_report_in_one_line(tmp_path: Path) -> None:
    report, table = tmp_path / "report.xml", tmp_path / "durations.json"
    report.write_text(REPORT)
    script = [sys.executable, "tools/test_durations.py"]
    done = subprocess.run([*script, str(report), "--output", str(table)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(table.read_text()) == {"tests/test_layers.py": 9.0, "tests/tools/test_archive.py": 3.8}
    report.write_text("<testsuites><testsuite>")
    bad = subprocess.run([*script, str(report), "--output", str(table)], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and str(report) in bad.stderr


def test_the_committed_table_names_test_files_of_this_suite() -> None:
    """A module renamed or deleted leaves a stale entry: `make test-durations` writes the table again."""
    table = json.loads((ROOT / "tests" / "durations.json").read_text())
    missing = [m for m in table if not (ROOT / m).is_file()]
    assert not missing, f"tests/durations.json names files that are gone: {missing}; run make test-durations"


@pytest.mark.slow
def test_the_suite_collects_the_longest_modules_first() -> None:
    """tests/conftest.py orders by the table: given last, the longer module is collected first, and a
    module the table lacks after every module it holds."""
    table = json.loads((ROOT / "tests" / "durations.json").read_text())
    absent = "tests/tools/test_test_durations.py"
    listed = sorted((m for m in table if m != absent and table[m] > 0), key=table.get)[-2:]  # shorter, longer
    args = [absent, *listed]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    modules = list(dict.fromkeys(line.split("::")[0] for line in done.stdout.splitlines() if "::" in line))
    assert modules == [listed[1], listed[0], absent], done.stdout[-2000:]
