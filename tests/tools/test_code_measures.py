"""tools/code_measures.py: the code's structure figures of a checkout (issue 68's before and after),
each counted exactly on small projects written here."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from tools import code_measures as cm

RECORDS = '''"""A module passing records as dicts."""
import importlib
from importlib import import_module
from typing import Dict, Literal, Optional


def read(row: dict, rows: list[dict[str, int]], mode: Literal["a"] = "a") -> Optional[Dict]:
    first = row["name"] + row["size"]  # 2 string-keyed reads
    second = row.get("other", 0) + row.get(first)  # 1 .get("k"): the second key is no literal
    row["seen"] = True  # 1 write
    row["count"] += 1  # 1 write (and no read)
    row.setdefault("tags", [])  # 1 write
    row[first] = 1  # no string key: not counted
    row.update(extra=1)
    importlib.import_module("x")
    import_module("y")
    return {"first": first, "second": second}


def plain(x: int, *args: "dict", **kwargs: str | None) -> int:
    return x
'''


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_each_figure_of_a_module_is_counted_exactly() -> None:
    figures = cm.module_figures(ast.parse(RECORDS))
    assert figures["subscript_reads"] == 2
    assert figures["get_reads"] == 1
    assert figures["string_keyed_reads"] == 3
    assert figures["string_key_writes"] == 3
    assert figures["update_calls"] == 1
    assert figures["dict_signatures"] == 4  # row, rows, the return, *args; not mode, x, kwargs or an int return
    assert figures["importlib_calls"] == 2


def test_dict_typed_annotations() -> None:
    typed = ["dict", "Dict", "typing.Dict", "dict[str, int]", "list[dict]", "List[Dict[str, Any]]"]
    typed += ["Optional[dict]", "dict | None", "Union[None, list[dict]]", "Iterator[dict]", "'dict'"]
    untyped = ["int", "list[str]", "Mapping[str, int]", "TypedDict", "tuple[dict, int]", "str | None", "'not valid('"]
    assert [a for a in typed if not cm.dict_typed(ast.parse(a, mode="eval").body)] == []
    assert [a for a in untyped if cm.dict_typed(ast.parse(a, mode="eval").body)] == []


def test_packages_are_found_and_the_layers_come_first(tmp_path: Path) -> None:
    for folder in ("utils", "commands", "study", "tests", "tools", "benchmarks", ".venv", "zeta"):
        write(tmp_path, {f"{folder}/__init__.py": ""})
    (tmp_path / "configs").mkdir()  # no __init__.py: no package
    assert cm.packages(tmp_path) == ("commands", "study", "utils", "zeta")  # the layers in order, then the rest


def test_import_graph_arrows_and_circles(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/a.py": "from utils import b\n",  # utils.b: a module
            "utils/b.py": "def f():\n    import utils.a\n",  # function-level: utils.a, a circle with a
            "utils/c.py": "from utils.a import name\nimport os\n",  # utils.a (not a module: its module)
            "study/__init__.py": "from utils import helper\n",  # no module utils.helper: utils's __init__
            "study/s.py": "import study\nfrom study.s import x\nimport utils.c\n",  # itself: no arrow
        },
    )
    graph = cm.module_imports(tmp_path, ("utils", "study"))
    assert graph == {
        "utils": set(),
        "utils.a": {"utils.b"},
        "utils.b": {"utils.a"},
        "utils.c": {"utils.a"},
        "study": {"utils"},
        "study.s": {"study", "utils.c"},
    }
    assert cm.import_circles(graph) == [["utils.a", "utils.b"]]
    figures = cm.measure(tmp_path)
    assert figures["packages"]["study"]["arrows"] == 3
    assert figures["packages"]["study"]["arrows_between_packages"] == 2
    assert figures["packages"]["utils"]["arrows_between_packages"] == 0
    assert figures["total"]["arrows"] == 6
    assert (figures["total"]["circles"], figures["circles"]) == (1, [["utils.a", "utils.b"]])


def test_main_prints_the_table_and_writes_the_json(tmp_path: Path, capsys) -> None:
    root = write(
        tmp_path / "project",
        {
            "utils/__init__.py": "",
            "utils/records.py": RECORDS,
            "commands/__init__.py": "",
            "commands/run.py": "from utils.records import read\n\n\ndef main(args: dict) -> None:\n    read(args)\n",
            "tests/test_x.py": 'x = {}["ignored"]\n',  # not production code
        },
    )
    assert cm.main(["--root", str(root), "--json", str(tmp_path / "m.json")]) == 0
    figures = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    assert len(RECORDS.splitlines()) == 21
    assert list(figures["packages"]) == ["commands", "utils"]
    assert figures["packages"]["commands"] == {
        **dict.fromkeys(cm.COLUMNS, 0),
        **{"modules": 2, "lines": 5, "dict_signatures": 1, "arrows": 1, "arrows_between_packages": 1},
    }
    utils = figures["packages"]["utils"]
    assert (utils["modules"], utils["lines"], utils["string_keyed_reads"], utils["string_key_writes"]) == (2, 21, 3, 3)
    assert figures["total"]["string_keyed_reads"] == 3
    assert figures["total"]["dict_signatures"] == 5
    assert (figures["total"]["modules"], figures["total"]["arrows"], figures["total"]["circles"]) == (4, 1, 0)
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| package | modules | lines |")
    assert table[2].startswith("| commands | 2 | 5 | 0 |")
    assert table[4].startswith("| **total** | 4 | 26 | 2 | 1 | 3 | 3 | 1 | 5 | 1 | 1 | 2 |")
    assert "4 modules, 1 arrows (1 between packages), 0 circles" in table[-1]
