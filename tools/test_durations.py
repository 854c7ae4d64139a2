"""The seconds each test module took, from a pytest JUnit XML report, into tests/durations.json.

tests/conftest.py starts the modules that took longest first, so that pytest-xdist's two workers
(`make test`: one module per worker at a time) end together instead of one running a long module
alone at the end. `make test-durations` runs the suite once and writes the table; a module missing
from it (a new one) runs last, as the short modules do.

    tools/test_durations.py REPORT.xml [--output tests/durations.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from commands.cli import main_guard  # noqa: E402
from utils.errors import HarnessError  # noqa: E402
from utils.files import atomic_write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def module_path(classname: str) -> str:
    """`tests.tools.test_archive.TestPack` -> `tests/tools/test_archive.py` (a class name is capitalised)."""
    parts = classname.split(".")
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def module_seconds(report: Path) -> dict[str, float]:
    """Each test file's summed test times (setup, call and teardown: its fixtures included), longest first."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        raise HarnessError(
            f"{report}: not a readable JUnit XML report ({e}); give the --junitxml file of a pytest run"
        ) from None
    seconds: dict[str, float] = defaultdict(float)
    for case in root.iter("testcase"):
        seconds[module_path(case.get("classname", ""))] += float(case.get("time") or 0)
    if not seconds:
        raise HarnessError(f"{report}: holds no test case; give the --junitxml file of a pytest run") from None
    return {m: round(s, 1) for m, s in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a pytest --junitxml report of the whole suite")
    parser.add_argument("--output", type=Path, default=ROOT / "tests" / "durations.json", help="the table written")
    args = parser.parse_args(argv)
    seconds = module_seconds(args.report)
    atomic_write_text(args.output, json.dumps(seconds, indent=1) + "\n")
    print(f"wrote {args.output}: {len(seconds)} modules, {sum(seconds.values()):.0f} s of tests in all")
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
