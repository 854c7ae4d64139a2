"""The figures of issue 76's acceptance, of `study/` and `commands/compare.py`, counted on the syntax
tree (tools/code_measures.py's way: the files only, so an older commit is measured the same way):

  python tools/study_measures.py                                   # this checkout
  python tools/study_measures.py --root /tmp/before --json before.json

Each figure is a list of places ('file:line what'), counted by its shape only. The tables below
(STAGE_OF, READ_STAGES, the owners, the names) describe the code as it is (study/'s layers, one
package each); a refactor that moves a module updates them in the same commit, and the counts then
say what still holds.

- graph: study/'s modules, the import arrows between them (any depth), circles, and floors (the
  longest chain of imports, counted in modules: a module importing no study module is floor 1);
- stage back-edges: an import from a module of an earlier stage (STAGES order) to a later one;
  a module's stage is that of its longest dotted prefix in STAGE_OF (so `study.read` may name a
  whole package); a study module with none is listed as unstaged;
- file access outside the read layer: calls that read or write files (`open`, a path's
  `read_text`/`glob`/`exists`/..., `glob.glob`, `json.load`), any function of utils.stored_files
  (stored outputs), subprocess or utils.provenance (git and what git made), writes (`write_text`,
  `savefig`, utils.files, utils.publish); "reads" counts modules outside READ_STAGES with any
  access but a write, "writes" those with a write;
- text parsed back: a line that calls split/rsplit/partition/replace/startswith/endswith/
  removeprefix/removesuffix/find/index/re.* on rendered text, i.e. a receiver named like text
  (TEXT_NAMES, or ending in _label/_text) or with a str argument holding a space or '=' (words of a
  page, 'k='), or that takes int()/float() of a slice of such a name; not inside a function of
  INPUT_READERS, which reads what a user declared (the family file's `compared_on`, read into its
  selection once, at load), not what the study rendered;
- label joins: a call of a function in LABEL_JOINS, or a line that compares (==, !=, in), or builds
  a tuple key of, a row label (an attribute or str key in LABEL_FIELDS);
- measure literals, table literals: str constants exactly equal to one of MEASURES or TABLES outside
  their owner (docstrings and f-string text are prose); a table name is not counted where it is a
  path component (`/`), a key read (`x["test"]`, `.get("concat")`: a file's key), compared
  with the `.name` of a path, folder or file or given to a name like one (`test_dir = "test"`),
  nor in WRITERS (the serializer) where it is a key of a dict display or an item of a list display
  (the JSON's keys, the CSV's columns);
- outcome comparisons: ==, !=, in, not in with an OUTCOMES string (or a tuple/list/set of them)
  as an operand, outside OUTCOME_OWNERS;
- design branches: an if/elif, conditional expression, while or comprehension condition whose test
  names DESIGN_NAMES (an attribute or a variable), outside DESIGN_OWNERS;
- raw JSON data: an annotation (field, variable, argument, return) typed `Mapping[str, Any]` (dict,
  Dict, MutableMapping; at any depth) or a study/ alias of it (`JsonObject`), outside the read layer
  and RAW_OWNERS (the serializer);
- string-keyed reads (code_measures' `x["k"]` and `.get("k")`), in KEYED_MODULES and all study/;
- optional fields: the fields of the dataclasses of RECORD_MODULES annotated `Optional[...]` or
  `X | None`, of all their fields;
- lines: study/'s physical lines; compare's imports: the names commands/compare.py imports from
  study (and from how many modules); load_config sites: its calls in SWEEP_MODULES (how often a
  sweep validates one config is a runtime figure: tests/commands/test_sweep.py counts it).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.code_measures import (  # noqa: E402
    ROOT,
    commit_of,
    dotted,
    floors,
    import_circles,
    is_str,
    keyed_reads,
    literals,
    module_files,
    module_imports,
)

STAGES = ("statistics", "records", "read", "test", "word", "simulate", "pages", "recipe")
STAGE_OF = {  # study/'s layers (docs/DESIGN.md, "The study's layers"); judge/ in two: tested, then worded
    "study": "records",  # the package's own __init__
    "study.stats": "statistics",
    "study.records": "records",
    "study.terms": "records",  # the measures, tables and outcomes, beside the records
    "study.read": "read",
    "study.judge": "word",
    "study.judge.findings": "test",
    "study.judge.sequential_findings": "test",
    "study.judge.across": "test",
    "study.simulate": "simulate",
    "study.pages": "pages",
    "study.run": "recipe",  # read -> judge -> pages, in one call (compare.py's)
}
READ_STAGES = {"read"}
FILE_METHODS = {"read_text", "read_bytes", "open", "glob", "rglob", "iterdir", "exists", "is_file", "is_dir", "stat"}
WRITE_METHODS = {"write_text", "write_bytes", "savefig", "mkdir", "unlink", "rmdir", "touch", "symlink_to"}
FILE_FUNCTIONS = {"open": "file", "json.load": "file", "os.listdir": "file", "os.walk": "file"}
ACCESS_MODULES = {"utils.stored_files": "stored", "subprocess": "git", "utils.provenance": "git"}  # module: the
ACCESS_MODULES |= {"utils.files": "write", "utils.publish": "write", "shutil": "write"}  # kind of its functions
PARSE_METHODS = {"split", "rsplit", "partition", "rpartition", "replace", "startswith", "endswith"}
PARSE_METHODS |= {"removeprefix", "removesuffix", "find", "index"}
TEXT_NAMES = {"label", "labels", "finding", "text", "sentence", "verdict", "compared_on", "reason", "cell", "title"}
LABEL_FIELDS = {"compared_on"}
LABEL_JOINS = {"find_row"}
INPUT_READERS = {"selection_of"}  # study/read/family.py: a family file's `compared_on` -> its Selection
MEASURES, MEASURE_OWNERS = {"NLL", "sacreBLEU"}, ("utils.metrics", "study.terms")  # the measure table: terms.Measure
TABLES, TABLE_OWNERS = {"degradation", "test", "concat", "buckets", "teacher_forced"}, ("study.terms",)  # terms.Table
OUTCOMES = {"direction", "both", "equivalent", "withheld", "inconclusive", "descriptive", "not tested"}
OUTCOME_OWNERS = ("study.judge.wording",)
DESIGN_NAMES = {"sequential", "look", "looks", "plan"}
DESIGN_OWNERS = (
    "study.judge.design",  # the design object: fixed or sequential, chosen once
    "study.stats.sequential",
    "study.stats.sequential_family",
    "study.judge.sequential_findings",
    "study.simulate.sequential_calibration",
)
WRITERS = ("study.pages.serialize",)  # the one serializer: its dict keys and lists spell the files' keys
KEYED_MODULES = ("study.read.family", "study.stats.sequential_family", "study.judge.verdicts")  # family, verdicts
RECORD_MODULES = ("study.records",)
RAW_OWNERS = ("study.pages.serialize",)  # beside the read layer, the one place that may hold raw JSON (it writes it)
COMPARE, SWEEP_MODULES = "commands.compare", ("commands.sweep", "commands.sweep_plan", "commands.sweep_job")


def stage(module: str, stage_of: dict[str, str] = STAGE_OF) -> str | None:
    """The stage of a module: that of its longest dotted prefix in `stage_of` (None: unstaged)."""
    prefixes = [module.rsplit(".", n)[0] for n in range(max(1, module.count(".")))]  # not study/ itself
    return next((stage_of[p] for p in prefixes if p in stage_of), None)


def back_edges(graph: dict[str, set[str]], stage_of: dict[str, str] = STAGE_OF) -> list[str]:
    """'a -> b (stage -> later stage)' for each import from an earlier stage to a later one."""
    order = {s: i for i, s in enumerate(STAGES)}
    found = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            sa, sb = stage(a, stage_of), stage(b, stage_of)
            if sa is not None and sb is not None and order[sa] < order[sb]:
                found.append(f"{a} -> {b} ({sa} -> {sb})")
    return found


def imported_from(tree: ast.Module, modules: dict[str, str]) -> dict[str, str]:
    """{local name: kind} of the functions and modules that `tree` imports from `modules` ({module: kind})."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):  # a function of the module, or the module (`from utils import files`)
            for a in node.names:
                module = node.module if node.module in modules else f"{node.module}.{a.name}"
                names.update({a.asname or a.name: modules[module]} if module in modules else {})
        elif isinstance(node, ast.Import):
            names.update({a.asname or a.name: modules[a.name] for a in node.names if a.name in modules})
    return names


def file_access(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, 'kind what') of each call that touches a file, a stored output or git (module docstring)."""
    project = imported_from(tree, ACCESS_MODULES)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        root = name.split(".")[0]
        if root in project and (name != root or name[:1].islower()):  # a module's function, or a function
            kind = project[root]
        elif name in FILE_FUNCTIONS:
            kind = FILE_FUNCTIONS[name]
        elif method in WRITE_METHODS:
            kind = "write"
        elif method in FILE_METHODS:
            kind = "file"
        else:
            continue
        found.append((node.lineno, f"{kind} {name or method}"))
    return found


RAW_MAPPINGS = {"Mapping", "MutableMapping", "dict", "Dict"}  # X[str, Any]: raw JSON, not yet a record


def is_raw(node: ast.AST, aliases: set[str] = frozenset()) -> bool:
    """Whether a type expression holds `Mapping[str, Any]` (or dict, Dict, MutableMapping; `typing.`
    spelled or not; at any depth: `Optional[list[Mapping[str, Any]]]`, or as its quoted text) or a name
    in `aliases`."""
    if is_str(node):
        try:
            return is_raw(ast.parse(node.value, mode="eval").body, aliases)
        except SyntaxError:
            return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in aliases:
            return True
        if isinstance(n, ast.Subscript) and dotted(n.value).rsplit(".", 1)[-1] in RAW_MAPPINGS:
            args = n.slice.elts if isinstance(n.slice, ast.Tuple) else []
            if len(args) == 2 and dotted(args[0]) == "str" and dotted(args[1]).rsplit(".", 1)[-1] == "Any":
                return True
    return False


def raw_aliases(tree: ast.Module) -> set[str]:
    """The names a module's top level binds to a raw mapping type (`JsonObject = Mapping[str, Any]`)."""
    return {
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and is_raw(node.value)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }


def raw_json(tree: ast.Module, aliases: set[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, 'what name') of each annotation (a field, a variable, an argument, a return) typed as raw
    JSON: `Mapping[str, Any]` or an alias of it (`aliases`: study/'s, `raw_aliases`) at any depth."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and is_raw(node.annotation, aliases):
            found.append((node.lineno, f"annotation {ast.unparse(node.target)}"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            arguments += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
            found += [
                (a.lineno, f"argument {node.name}({a.arg})")
                for a in arguments
                if a.annotation and is_raw(a.annotation, aliases)
            ]
            if node.returns is not None and is_raw(node.returns, aliases):
                found.append((node.lineno, f"return of {node.name}"))
    return sorted(found)


def text_named(node: ast.AST) -> bool:
    """Whether an expression is named like rendered text: `x.label`, `finding`, `h["compared_on"]`, ..."""
    if isinstance(node, ast.Subscript) and is_str(node.slice):
        name = node.slice.value
    elif isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted(node).rsplit(".", 1)[-1] or getattr(node, "attr", "")
    else:
        return False
    return name in TEXT_NAMES or name.endswith(("_label", "_text"))


def text_parsed_back(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of each line that parses or patches rendered text (module docstring): one per line."""
    found = {}
    readers = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in INPUT_READERS]
    declared_input = {id(node) for f in readers for node in ast.walk(f)}
    for node in ast.walk(tree):
        if id(node) in declared_input:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            words = [a.value for a in node.args if is_str(a) and (" " in a.value or "=" in a.value)]
            if node.func.attr in PARSE_METHODS and (text_named(node.func.value) or words):
                found.setdefault(node.lineno, f".{node.func.attr}({', '.join(map(repr, words))})")
            elif dotted(node.func.value) == "re" and any(text_named(a) for a in node.args):
                found.setdefault(node.lineno, f"re.{node.func.attr}")
        elif isinstance(node, ast.Call) and dotted(node.func) in ("int", "float") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Slice) and text_named(arg.value):
                found.setdefault(node.lineno, f"{dotted(node.func)}() of a slice")
    return sorted(found.items())


def is_label(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in LABEL_FIELDS
    if isinstance(node, ast.Subscript) and is_str(node.slice):
        return node.slice.value in LABEL_FIELDS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and is_str(node.args[0]) and node.args[0].value in LABEL_FIELDS
    return False


def label_joins(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of each line that finds a row by its label (module docstring): one per line."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted(node.func).rsplit(".", 1)[-1] in LABEL_JOINS:
            found.setdefault(node.lineno, f"{dotted(node.func)}()")
        elif isinstance(node, ast.Compare) and not all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            operands = [node.left, *node.comparators]
            parts = [e for o in operands for e in (o.elts if isinstance(o, ast.Tuple) else [o])]
            if any(is_label(p) for p in parts):
                found.setdefault(node.lineno, "a label compared")
        elif isinstance(node, ast.Tuple) and any(is_label(e) for e in node.elts):
            found.setdefault(node.lineno, "a label in a key")
    return sorted(found.items())


def path_named(node: ast.AST) -> bool:
    """Whether an expression is named like a path, folder or file (`run.path.name`, `test_dir`)."""
    name = dotted(node).lower() if isinstance(node, (ast.Name, ast.Attribute)) else ""
    return any(word in name for word in ("path", "dir", "folder", "file"))


def file_keys(tree: ast.Module, written: bool = False) -> set[int]:
    """The ids of str constants that name a file's part: a path component (`/`), a key read
    (`x["k"]`, `.get("k")`), a name compared with a path's, folder's or file's `.name` or given to a
    name like one (`folder, settings = variant or ("test", {})`); with `written` (the serializer: it
    spells the files' keys), also the keys of a dict display and the items of a list display."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.update(id(n) for n in (node.left, node.right))
        elif isinstance(node, ast.Subscript):
            found.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            found.update(id(a) for a in node.args[:1])
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "name" and path_named(o) for o in operands):
                found.update(id(o) for o in operands)
        elif isinstance(node, ast.Assign):  # `test_dir = "test"`, `folder, x = variant or ("test", {})`
            values = node.value.values if isinstance(node.value, ast.BoolOp) else [node.value]
            for target, value in ((t, v) for t in node.targets for v in values):
                tuples = isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                pairs = zip(target.elts, value.elts) if tuples else [(target, value)]
                found.update(id(v) for n, v in pairs if path_named(n))
        elif written and isinstance(node, ast.Dict):
            found.update(id(k) for k in node.keys if k is not None)
        elif written and isinstance(node, ast.List):
            found.update(id(e) for e in node.elts)
    return found


def outcome_comparisons(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, outcome) of each ==, !=, in, not in with an outcome string (or a collection of them)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and not all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            for o in (node.left, *node.comparators):
                words = [e for e in (o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o]) if is_str(e)]
                if any(w.value in OUTCOMES for w in words):
                    found.append((node.lineno, "/".join(w.value for w in words)))
                    break
    return found


def design_branches(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, names) of each branch whose condition names the study's design (module docstring)."""
    tests = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tests.append(node.test)
        elif isinstance(node, ast.comprehension):
            tests += node.ifs
    found = []
    for test in tests:
        names = {getattr(n, "attr", None) or getattr(n, "id", None) for n in ast.walk(test)}
        if names & DESIGN_NAMES:
            found.append((test.lineno, ", ".join(sorted(names & DESIGN_NAMES))))
    return found


def optional_fields(tree: ast.Module) -> tuple[list[tuple[int, str]], int]:
    """((line, 'Class.field') of each Optional field of a dataclass, the number of all their fields)."""
    found, total = [], 0
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if not any(dotted(d.func if isinstance(d, ast.Call) else d).endswith("dataclass") for d in cls.decorator_list):
            continue
        for item in (i for i in cls.body if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)):
            text = item.annotation.value if is_str(item.annotation) else ast.unparse(item.annotation)
            text = text.replace("typing.", "")
            total += not text.startswith("ClassVar")
            if text.startswith("Optional[") or "None" in [part.strip() for part in text.split("|")]:
                found.append((item.lineno, f"{cls.name}.{item.target.id}"))
    return found, total


def study_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, 'module.name') of each name imported from study (any depth)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "study" and node.level == 0:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "study"]
    return found


def calls_of(tree: ast.Module, function: str) -> list[tuple[int, str]]:
    return [
        (n.lineno, function)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and dotted(n.func).rsplit(".", 1)[-1] == function
    ]


def outside(owners: tuple[str, ...]):
    """Whether a module is none of `owners` (nor inside one of them)."""
    return lambda module: not any(module == o or module.startswith(f"{o}.") for o in owners)


def figure(places: dict[str, list[tuple[int, str]]], files: dict[str, Path], root: Path, keep=lambda m: True) -> dict:
    """{"count", "modules", "where": ['file:line what', ...]} of the places in the modules kept."""
    kept = {m: v for m, v in sorted(places.items()) if keep(m) and v}
    where = [f"{files[m].relative_to(root).as_posix()}:{n} {what}" for m, v in kept.items() for n, what in sorted(v)]
    return {"count": len(where), "modules": len(kept), "where": where}


def graph_figures(graph: dict) -> dict:
    """The import graph's size: modules, arrows, floors and circles."""
    edges = sum(len(v) for v in graph.values())
    return {"modules": len(graph), "edges": edges, "floors": floors(graph), "circles": len(import_circles(graph))}


def measure_study(root: Path) -> dict:
    """Every figure of the module docstring, of the checkout at `root`."""
    files = module_files(root, ("study", "commands"))
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in files.items()}
    graph = module_imports(root, ("study",))
    study = [m for m in files if m.split(".")[0] == "study"]
    judged = study + [COMPARE] * (COMPARE in files)

    def count(counter, modules=judged, keep=lambda m: True) -> dict:
        return figure({m: counter(trees[m]) for m in modules if m in trees}, files, root, keep)

    reader = outside(tuple(m for m in study if stage(m) in READ_STAGES))
    access = {m: file_access(trees[m]) for m in study}
    optional = {m: optional_fields(trees[m]) for m in study if not outside(RECORD_MODULES)(m)}
    aliases = set().union(*(raw_aliases(trees[m]) for m in study))
    imports, edges = count(study_imports, [COMPARE]), back_edges(graph)
    tables = {m: literals(trees[m], TABLES, file_keys(trees[m], m in WRITERS)) for m in judged}
    figures = {
        "stage back-edges": {"count": len(edges), "modules": len({e.split(" ")[0] for e in edges}), "where": edges},
        "file, stored-output or git reads outside the read layer": figure(
            {m: [p for p in v if not p[1].startswith("write")] for m, v in access.items()}, files, root, reader
        ),
        "file writes outside the read layer": figure(
            {m: [p for p in v if p[1].startswith("write")] for m, v in access.items()}, files, root, reader
        ),
        "places parsing or patching rendered text": count(text_parsed_back),
        "joins of rows by label": count(label_joins),
        '"NLL" and "sacreBLEU" literals outside the measure table': count(
            lambda t: literals(t, MEASURES), keep=outside(MEASURE_OWNERS)
        ),
        "findings-table name literals": figure(tables, files, root, outside(TABLE_OWNERS)),
        "outcome strings compared outside wording": count(outcome_comparisons, keep=outside(OUTCOME_OWNERS)),
        "design branches outside the design": count(design_branches, keep=outside(DESIGN_OWNERS)),
        "Mapping[str, Any] data outside the read layer and the serializer": figure(
            {m: raw_json(trees[m], aliases) for m in study}, files, root, lambda m: reader(m) and outside(RAW_OWNERS)(m)
        ),
        "string-keyed reads in the family and verdict code": count(keyed_reads, KEYED_MODULES),
        "string-keyed reads in study/": count(keyed_reads, study),
        "Optional fields of the records": {
            **figure({m: v[0] for m, v in optional.items()}, files, root),
            "of": sum(v[1] for v in optional.values()),
        },
        "lines of study/": {"count": sum(len(files[m].read_text(encoding="utf-8").splitlines()) for m in study)},
        "names commands/compare.py imports from study": {
            **imports,
            "modules": len({w.split(" ")[1].rsplit(".", 1)[0] for w in imports["where"]}),
        },
        "load_config calls in the sweep": count(lambda t: calls_of(t, "load_config"), SWEEP_MODULES),
    }
    return {
        "root": str(root),
        "commit": commit_of(root),
        "graph": graph_figures(graph),
        "unstaged": sorted(m for m in study if stage(m) is None),
        "figures": figures,
    }


def markdown(measured: dict, where: bool = False) -> str:
    """The figures as a Markdown table (with `where`, each figure's places under it)."""
    g = measured["graph"]
    lines = [
        f"study/ at {measured['commit'] or measured['root']}: {g['modules']} modules, {g['edges']} import arrows, "
        f"{g['floors']} floors, {g['circles']} circles"
        + (f"; unstaged (no STAGE_OF entry): {', '.join(measured['unstaged'])}" if measured["unstaged"] else ""),
        "",
        "| figure | count | modules |",
        "|---|---|---|",
    ]
    for name, f in measured["figures"].items():
        count = f"{f['count']:,}" + (f" of {f['of']}" if "of" in f else "")
        lines.append(f"| {name} | {count} | {f.get('modules', '')} |")
    if where:
        for name, f in measured["figures"].items():
            lines += [f"\n{name}:", *(f"- {w}" for w in f.get("where", []))] if f.get("where") else []
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures and their places to FILE")
    parser.add_argument("--where", action="store_true", help="also print each figure's places")
    args = parser.parse_args(argv)
    if not (args.root / "study" / "__init__.py").is_file():
        parser.error(f"{args.root} holds no study/ package")
    measured = measure_study(args.root.resolve())
    print(markdown(measured, args.where))
    if args.json:
        args.json.write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
