"""The packages import one way (docs/DESIGN.md, "Layers"), with no exceptions:

    entry scripts (train.py, ...)  ->  commands/  ->  study/, training/  ->  evaluation/
    ->  artifacts/  ->  decoding/  ->  settings/  ->  models/, data/, tokenizer/  ->  utils/

A package imports only itself and the packages listed for it below (function-level imports
count); an entry script imports only `commands`; no module anywhere in the project (tests,
benchmarks and tools included) imports an entry script: other code calls the command's function in
commands/<name>.py; and no two modules import each other, however indirectly (function-level
imports count): within a package too, the modules form layers. study/ names its layers, one package
each (docs/DESIGN.md, "The study's layers"): stats <- records <- read <- judge, simulate <- pages <- run
(the recipe), and only its read layer opens a file, reads a stored output or runs git."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools.code_measures import LAYERS, import_circles, literals, module_imports
from tools.study_measures import back_edges, file_access, raw_aliases, raw_json

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("train", "test", "inference", "visualize", "compare", "sweep", "average", "export")
MAY_IMPORT = {
    "commands": set(LAYERS),  # (every package: tools/code_measures.py lists them in order)
    # judging a study (compare.py) from runs that evaluation scored, one model each; nothing below imports it
    "study": {"study", "evaluation", "artifacts", "decoding", "settings", "models", "data", "tokenizer", "utils"},
    # beside study: training validates with evaluation's metrics and decoding's search
    "training": {"training", "evaluation", "artifacts", "decoding", "settings", "models", "data", "tokenizer", "utils"},
    # scoring one model: translating, test-set scoring, teacher-forced measures, metrics
    "evaluation": {"evaluation", "artifacts", "decoding", "settings", "models", "data", "tokenizer", "utils"},
    # a trained model as files: checkpoints, exports, loading for decoding, the CTranslate2 conversion
    "artifacts": {"artifacts", "decoding", "settings", "models", "tokenizer", "utils"},
    "decoding": {"decoding", "settings", "models", "utils"},
    # the config, validated against the encodings' own options (the registry in models/)
    "settings": {"settings", "models", "utils"},
    "models": {"models", "utils"},
    "data": {"data", "utils"},
    "tokenizer": {"tokenizer", "utils"},
    "utils": {"utils"},
}
PACKAGES = tuple(MAY_IMPORT)
ELSEWHERE = ("tests", "benchmarks", "tools")  # may import any package, never an entry script


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every absolute import in the module (function-level ones included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def violations(root: Path) -> list[str]:
    """Every import against the layer rule in the project at `root`."""
    wrong = []
    for package, allowed in MAY_IMPORT.items():
        for module in sorted((root / package).rglob("*.py")):
            for name in sorted(imported_modules(module) & (set(PACKAGES) | set(SCRIPTS))):
                if name not in allowed:
                    wrong.append(f"{module.relative_to(root)} imports {name}")
    for script in SCRIPTS:
        path = root / f"{script}.py"
        if path.is_file():
            wrong += [
                f"{script}.py imports {name}"
                for name in sorted(imported_modules(path) & set(PACKAGES))
                if name != "commands"
            ]
    for folder in ELSEWHERE:
        for module in sorted((root / folder).rglob("*.py")):
            wrong += [
                f"{module.relative_to(root)} imports the entry script {name}.py"
                for name in sorted(imported_modules(module) & set(SCRIPTS))
            ]
    return wrong


def test_imports_run_one_way() -> None:
    assert all(any((ROOT / p).rglob("*.py")) for p in PACKAGES)
    assert violations(ROOT) == []


def test_no_modules_import_each_other(tmp_path: Path) -> None:
    assert import_circles(module_imports(ROOT, PACKAGES)) == []
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "utils" / "a.py").write_text("from utils.b import f\n", encoding="utf-8")
    (tmp_path / "utils" / "b.py").write_text("def f():\n    from utils import c\n", encoding="utf-8")
    (tmp_path / "utils" / "c.py").write_text("import utils.a\n", encoding="utf-8")  # a -> b -> c -> a
    (tmp_path / "utils" / "d.py").write_text("from utils.a import x\n", encoding="utf-8")  # outside the circle
    assert import_circles(module_imports(tmp_path, PACKAGES)) == [["utils.a", "utils.b", "utils.c"]]


@pytest.mark.parametrize(
    "module, source",
    [
        ("models/m.py", "from decoding.search import beam_search\n"),  # a lower layer importing a higher one
        ("utils/m.py", "def f():\n    from models.positional_encodings import POSITIONAL_ENCODINGS\n"),  # lazily
        ("data/m.py", "import training.engine\n"),
        ("decoding/m.py", "from evaluation import metrics\n"),  # across one floor the wrong way
        ("evaluation/m.py", "from study.judge.verdicts import word_tables\n"),  # scoring one model judges no study
        ("training/m.py", "def f():\n    import study.read.run_groups\n"),  # nor does training, lazily either
        ("study/m.py", "from training.run import train_run\n"),  # study and training: one floor, apart
        ("commands/m.py", "import compare\n"),  # an entry script, from a package
        ("tests/test_m.py", "from train import main\n"),  # ... or from a test
        ("train.py", "from training.run import train_run\n"),  # a script skipping the command layer
    ],
)
def test_the_checker_fails_on_a_back_edge(tmp_path: Path, module: str, source: str) -> None:
    for package in (*PACKAGES, *ELSEWHERE):
        (tmp_path / package).mkdir()
    (tmp_path / module).write_text(source, encoding="utf-8")
    assert len(violations(tmp_path)) == 1


@pytest.mark.parametrize("script", SCRIPTS)
def test_entry_scripts_are_thin_doors(script: str) -> None:
    """Each script is short and runs its command module's `main` under the guard, imported inside it
    (`lazy_main`), so that a Ctrl-C while torch loads is one line, not a traceback."""
    path = ROOT / f"{script}.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) < 80
    assert imported_modules(path) == {"commands"}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    froms = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert froms == {"commands.cli"}
    lazy = [
        n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "lazy_main"
    ]
    assert lazy == [f"commands.{script}"]


def long_functions(root: Path, limit: int = 60) -> list[str]:
    """Functions (methods, nested ones) longer than `limit` lines in the project's Python files."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if {".venv", "runs", "results"} & set(path.relative_to(root).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= limit:
                found.append(
                    f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
                )
    return found


def test_no_function_is_longer_than_60_lines(tmp_path: Path) -> None:
    """Long functions are split into named steps (docs/DESIGN.md, "Layers")."""
    assert long_functions(ROOT) == []
    (tmp_path / "m.py").write_text("def f():\n" + "    x = 1\n" * 60, encoding="utf-8")  # the checker sees one
    assert long_functions(tmp_path) == ["m.py:1 f (61 lines)"]


def test_decoding_backends_are_dispatched_not_asked() -> None:
    """Only the loader picks a backend (artifacts/): translation, scoring and the commands call
    `DecodingBackend` members and never import a particular backend to test which one they have."""
    backend_modules = {"decoding.ctranslate2_backend", "decoding.backend"}
    graph = module_imports(ROOT, PACKAGES)
    asking = sorted(
        name
        for name, imports in graph.items()
        if "decoding.ctranslate2_backend" in imports and not name.startswith(("artifacts.", "decoding."))
    )
    assert asking == []
    assert all(m in graph for m in backend_modules)


def module_test_file(root: Path, path: Path) -> Path:
    """Where a module's tests live: tests/<package>/test_<module>.py (a package's own __init__.py:
    tests/<package>/test_<package>.py)."""
    relative = path.relative_to(root)
    name = relative.parent.name if relative.stem == "__init__" else relative.stem
    return root / "tests" / relative.parent / f"test_{name}.py"


def modules_without_test_file(root: Path) -> set[str]:
    """Modules with logic (40 lines or more with a function or class) and no tests/<package>/test_<module>.py."""
    missing = set()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            has_logic = any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.walk(ast.parse(text)))
            if len(text.splitlines()) >= 40 and has_logic and not module_test_file(root, path).is_file():
                missing.add(str(path.relative_to(root)))
    return missing


def test_every_module_with_logic_has_its_test_file(tmp_path: Path) -> None:
    assert sorted(modules_without_test_file(ROOT)) == [], "modules without tests/<package>/test_<module>.py"
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "m.py").write_text("def f():\n    return 1\n" + "# .\n" * 40, encoding="utf-8")
    assert modules_without_test_file(tmp_path) == {"utils/m.py"}
    (tmp_path / "tests" / "utils").mkdir(parents=True)
    (tmp_path / "tests" / "utils" / "test_m.py").write_text("", encoding="utf-8")
    assert modules_without_test_file(tmp_path) == set()


def literal_spellings(root: Path, names: set[str], owner: str = "utils/run_files.py") -> list[str]:
    """'file:line name' of every string literal that is one of `names` in the production code (not
    tests/, not the owner; docstrings and the text of f-strings are prose, not a file's name in use)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(("tests/", ".venv/")) or relative == owner:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{relative}:{line} {value}" for line, value in literals(tree, names)]
    return found


def test_a_run_folders_file_names_are_spelled_by_their_owner_only(tmp_path: Path) -> None:
    """Issue 68: `"scores.json"` was a literal in 8 production modules; utils/run_files.py names every file
    of a run folder once, and every other module uses its constants."""
    from utils.run_files import NAMES

    names = set(NAMES.values())
    assert {"config.yaml", "scores.json", "metrics.jsonl", "provenance.json"} <= names
    assert literal_spellings(ROOT, names) == []
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "m.py").write_text('"""A module naming scores.json in prose."""\nNAME = "scores.json"\n')
    assert literal_spellings(tmp_path, names) == ["utils/m.py:2 scores.json"]


def lookups_by_name(root: Path) -> list[str]:
    """'file:line what' of every import made for its side effect or by name in the production code (not
    tests/): a plain `import models...` (the house imports names: `from models... import X`), and
    any use of importlib in utils/ (a module name in a string slips past the layer rule)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(("tests/", ".venv/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                found += [f"{relative}:{node.lineno} import {n}" for n in names if n.split(".")[0] == "models"]
                if relative.startswith("utils/"):
                    found += [f"{relative}:{node.lineno} import {n}" for n in names if n == "importlib"]
            elif isinstance(node, ast.ImportFrom) and relative.startswith("utils/") and node.module == "importlib":
                found.append(f"{relative}:{node.lineno} from importlib")
    return found


def test_the_encodings_are_imported_by_name_never_for_a_side_effect(tmp_path: Path) -> None:
    """Issue 68: utils/encoding_registry.py imported models.positional_encodings by name (importlib) and
    13 modules imported it for its side effect; the registry now lives with the encodings and
    settings/ imports it as any other name."""
    assert lookups_by_name(ROOT) == []
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "c.py").write_text("import models.positional_encodings  # noqa: F401\n")
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "r.py").write_text("def f():\n    import importlib\n")
    assert lookups_by_name(tmp_path) == [
        "commands/c.py:1 import models.positional_encodings",
        "utils/r.py:2 import importlib",
    ]


# study/'s layers (a package each; records.py and the package's __init__ at its root): the layers each may import
STUDY_MAY_IMPORT = {
    "stats": {"stats"},
    "records": {"stats", "records"},
    "read": {"stats", "records", "read"},
    "judge": {"stats", "records", "read", "judge"},
    "simulate": {"stats", "records", "read", "simulate"},
    "pages": {"stats", "records", "read", "judge", "pages"},
    "run": {"stats", "records", "read", "judge", "pages"},  # study/run.py: read -> judge -> pages, in one call
}
STUDY_READS = "read"  # the one layer that opens a file, reads a stored output or runs git
STUDY_RAW = {"study/pages/serialize.py"}  # beside the read layer, the one module that may hold raw JSON: it writes it
STUDY_WRITES = {
    "study/pages/comparison_plots.py"
}  # the pages' one writer: the plots' PNGs (compare.py writes the text)


def study_layer(module: str) -> str:
    """The layer of a study module: its package under study/ (a module at the root but records.py and
    terms.py: its own name, in no layer), records for the package's own __init__, records.py and terms.py."""
    return "records" if module in ("study", "study.records", "study.terms") else module.split(".")[1]


def study_layer_violations(root: Path) -> list[str]:
    """'a imports b (layer -> layer)' for each import of a study module against STUDY_MAY_IMPORT, and each
    module outside the layers (a flat module at study/'s root other than records.py and terms.py)."""
    graph = module_imports(root, ("study",))
    wrong = [f"{m} is in no layer" for m in sorted(graph) if study_layer(m) not in STUDY_MAY_IMPORT]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if study_layer(a) in STUDY_MAY_IMPORT and study_layer(b) not in STUDY_MAY_IMPORT[study_layer(a)]:
                wrong.append(f"{a} imports {b} ({study_layer(a)} -> {study_layer(b)})")
    return wrong


def study_file_access(root: Path) -> list[str]:
    """'file:line what' of each read of a file, a stored output or git in study/ outside its read layer,
    and each write outside it and STUDY_WRITES (study/** read recursively)."""
    found = []
    for path in sorted((root / "study").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for line, what in file_access(ast.parse(path.read_text(encoding="utf-8"))):
            writes = what.startswith("write")
            if path.parent.name != STUDY_READS and (not writes or relative not in STUDY_WRITES):
                found.append(f"{relative}:{line} {what}")
    return found


def study_raw_json(root: Path) -> list[str]:
    """'file:line what' of each annotation in study/ typed as raw JSON (`Mapping[str, Any]`, or an alias
    of it such as records.JsonObject) outside the read layer and STUDY_RAW: past the read, data are records."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted((root / "study").rglob("*.py"))}
    aliases = set().union(*map(raw_aliases, trees.values()))
    found = []
    for path, tree in trees.items():
        relative = path.relative_to(root).as_posix()
        if path.parent.name != STUDY_READS and relative not in STUDY_RAW:
            found += [f"{relative}:{line} {what}" for line, what in raw_json(tree, aliases)]
    return found


def test_study_imports_its_layers_in_order() -> None:
    """Issue 76: study/ was 28 flat modules whose imports ran against their stated order (5 back-edges);
    its layers are packages now, each importing only those below it, and inside judge/ the rows are
    tested before they are worded (tools/study_measures.py: STAGE_OF)."""
    assert study_layer_violations(ROOT) == []
    assert {study_layer(m) for m in module_imports(ROOT, ("study",))} == set(STUDY_MAY_IMPORT)
    assert back_edges(module_imports(ROOT, ("study",))) == []


def test_only_the_read_layer_of_study_touches_files_and_git() -> None:
    assert study_file_access(ROOT) == []
    assert study_raw_json(ROOT) == []  # nor holds raw JSON (but the serializer, which writes it)


@pytest.mark.parametrize(
    "module, source",
    [
        ("study/stats/m.py", "from study.records import RunRecord\n"),  # statistics know no record
        ("study/read/m.py", "def f():\n    from study.judge.verdicts import word_tables\n"),  # lazily too
        ("study/judge/m.py", "from study.pages.headline import headline_markdown\n"),
        ("study/judge/n.py", "import study.simulate.calibration\n"),  # judge and simulate: side by side
        ("study/pages/m.py", "from study.simulate.calibration import draw\n"),
        ("study/records.py", "from study.read.family import Family\n"),
        ("study/flat.py", ""),  # a module outside the layers
    ],
)
def test_the_study_layer_checker_fails_on_a_back_edge(tmp_path: Path, module: str, source: str) -> None:
    targets = ("records", "read/family", "judge/verdicts", "pages/headline", "simulate/calibration")
    for name in (f"study/{t}.py" for t in targets):  # what the sources import, empty
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    assert study_layer_violations(tmp_path) == []
    (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / module).write_text(source, encoding="utf-8")
    assert len(study_layer_violations(tmp_path)) == 1


@pytest.mark.parametrize(
    "module, source",
    [
        ("study/judge/m.py", "def f(p):\n    return open(p).read()\n"),
        ("study/pages/m.py", "from utils.stored_files import read_lines\n\n\ndef f(p):\n    return read_lines(p)\n"),
        ("study/simulate/deep/m.py", "def f(p):\n    return p.read_text()\n"),  # any depth
        ("study/records.py", "import subprocess\n\n\ndef f():\n    return subprocess.run(['git', 'log'])\n"),
        ("study/judge/m.py", "def f(p):\n    p.write_text('x')\n"),  # a write beside the plots
    ],
)
def test_the_study_file_checker_fails_on_a_read_outside_the_read_layer(
    tmp_path: Path, module: str, source: str
) -> None:
    (tmp_path / module).parent.mkdir(parents=True)
    (tmp_path / module).write_text(source, encoding="utf-8")
    assert len(study_file_access(tmp_path)) == 1
    (tmp_path / "study" / "read").mkdir(parents=True, exist_ok=True)
    (tmp_path / "study" / "read" / "ok.py").write_text("def f(p):\n    return open(p).read()\n", encoding="utf-8")
    assert len(study_file_access(tmp_path)) == 1  # the read layer reads


@pytest.mark.parametrize(
    "module, source",
    [
        ("study/judge/m.py", "from typing import Any, Mapping\n\n\ndef f(row: Mapping[str, Any]) -> None: ...\n"),
        ("study/pages/m.py", "import typing\n\n\ndef f() -> typing.Optional[list[dict[str, typing.Any]]]: ...\n"),
        (
            "study/records.py",
            "from dataclasses import dataclass\n\n\n@dataclass\nclass R:\n    x: 'Mapping[str, Any]'\n",
        ),
        ("study/simulate/m.py", "from study.records import JsonObject\n\nrows: list[JsonObject] = []\n"),  # an alias
    ],
)
def test_the_study_raw_json_checker_fails_on_a_mapping_of_any_outside_the_read_layer(
    tmp_path: Path, module: str, source: str
) -> None:
    (tmp_path / "study" / "read").mkdir(parents=True)
    (tmp_path / "study" / "read" / "ok.py").write_text(  # the read layer reads raw JSON into records
        "from typing import Any, Mapping\n\nJsonObject = Mapping[str, Any]\n\n\ndef f(x: JsonObject) -> None: ...\n",
        encoding="utf-8",
    )
    assert study_raw_json(tmp_path) == []
    (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / module).write_text(source, encoding="utf-8")
    assert len(study_raw_json(tmp_path)) == 1
