"""Figures of the code's structure, per top-level production package and in total, to report a
refactor's "before and after" (issue 68). It reads the files only, so it measures older commits too:

  python tools/code_measures.py                                    # this checkout
  git worktree add /tmp/before 6c02a92
  python tools/code_measures.py --root /tmp/before --json before.json

The packages: commands, training, evaluation, artifacts, decoding, models, data, tokenizer, utils (in
that layer order), then any other top-level folder with an __init__.py, alphabetically (not tests/,
benchmarks/, tools/ or a hidden folder such as .venv/). Every figure is counted on the syntax tree of
each .py file under a package, function bodies included, by its shape only (no types are inferred):

- modules, lines: the .py files, and their physical lines (blank lines, comments, docstrings included);
- reads x["k"]: subscripts read (Load context) whose key is a str constant (`Literal["a"]` is not one);
- reads .get("k"): calls of any method named `get` whose first argument is a str constant (a dict's
  and `os.environ.get` alike); "string-keyed reads" is the two summed;
- writes x["k"]: subscripts assigned with a str-constant key (`x["k"] = v`, `x["k"] += v`, a target of
  unpacking or of `for`), plus calls of `.setdefault("k", ...)`; `del x["k"]` is not counted;
- .update() calls: calls of any method named `update`, whatever the arguments (a set's too);
- dict-typed signatures: parameter and return annotations that are `dict` or `Dict` (subscripted or
  not, `typing.Dict` too), or hold one in list/List/Sequence/Iterable/Iterator/Optional/Union or
  `X | None` (`list[dict]`, `Optional[dict[str, int]]`, a quoted "dict"); one per annotation;
- arrows: edges of the import graph from the package's modules to the project's modules. Every
  `import` and `from ... import` counts, at any depth (function-level ones too); `from a import b`
  points to a.b where that is a module, else to a (its package's __init__); relative imports are not
  followed, and a module importing itself is no arrow. "Between packages": the arrows whose target is
  in another top-level package;
- circles (total only): strongly connected components of the import graph with more than one module;
- floors (total only): the longest chain of imports, in modules (one importing no project module: 1);
- importlib calls: calls through `importlib` (`importlib.import_module(...)`, `importlib.util...`, or
  a name imported from importlib): modules loaded by name, arrows the import graph does not see.

tools/study_measures.py counts, with these helpers, the figures of study/ that issue 76 names (stage
back-edges, file access by layer, text parsed back, identity literals, design branches, ...).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = (
    "commands",
    "study",
    "training",
    "evaluation",
    "artifacts",
    "decoding",
    "settings",
    "models",
    "data",
    "tokenizer",
    "utils",
)
NOT_PRODUCTION = {"tests", "benchmarks", "tools"}
DICT_NAMES = {"dict", "Dict"}
WRAPPERS = {"list", "List", "Sequence", "Iterable", "Iterator", "Optional", "Union"}
COLUMNS = {  # figure: its heading in the Markdown table
    "modules": "modules",
    "lines": "lines",
    "subscript_reads": 'reads `x["k"]`',
    "get_reads": 'reads `.get("k")`',
    "string_keyed_reads": "string-keyed reads",
    "string_key_writes": 'writes `x["k"] =`, `.setdefault("k")`',
    "update_calls": "`.update()` calls",
    "dict_signatures": "dict-typed signatures",
    "arrows": "arrows",
    "arrows_between_packages": "arrows between packages",
    "importlib_calls": "importlib calls",
}


def packages(root: Path) -> tuple[str, ...]:
    """The top-level production packages of the checkout at `root`, the layers first."""
    found = {p.parent.name for p in root.glob("*/__init__.py")}
    found = {name for name in found if name not in NOT_PRODUCTION and not name.startswith(".")}
    return tuple(n for n in LAYERS if n in found) + tuple(sorted(found - set(LAYERS)))


def module_name(root: Path, path: Path) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name.removesuffix(".__init__")


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    return {module_name(root, p): p for package in packages for p in sorted((root / package).rglob("*.py"))}


def module_imports(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """The modules of `packages` and, for each, the project modules it imports (`from a import b` counts
    a.b where that is a module, and a's package __init__ otherwise)."""
    modules = module_files(root, packages)
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
                found.update(targets or [node.module])
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (Tarjan's strongly
    connected components of more than one module)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def floors(graph: dict[str, set[str]]) -> int:
    """The longest chain of imports, in modules (a graph with a circle has none: 0)."""
    if import_circles(graph):
        return 0
    depth: dict[str, int] = {}

    def floor(v: str) -> int:
        if v not in depth:
            depth[v] = 1 + max((floor(w) for w in graph[v] if w in graph), default=0)
        return depth[v]

    return max((floor(v) for v in graph), default=0)


def dotted(node: ast.AST) -> str:
    """'a.b.c' of a name or an attribute chain on one ('' for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and dotted(node.value):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def prose(tree: ast.Module) -> set[int]:
    """The ids of the docstrings' and f-strings' constants: prose, not a name in use."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and is_str(body[0].value):
            found.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            found.update(id(part) for part in ast.walk(node))
    return found


def literals(tree: ast.Module, names: set[str], skip: set[int] = frozenset()) -> list[tuple[int, str]]:
    """(line, value) of each str constant that is one of `names`, not prose and not in `skip`."""
    skip = prose(tree) | set(skip)
    found = [n for n in ast.walk(tree) if is_str(n) and n.value in names and id(n) not in skip]
    return [(n.lineno, n.value) for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def dict_typed(node: ast.AST) -> bool:
    """Whether an annotation is a plain dict, or dicts in a list / an Optional / a union."""
    if is_str(node):
        try:
            return dict_typed(ast.parse(node.value, mode="eval").body)
        except (SyntaxError, ValueError):
            return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return dict_typed(node.left) or dict_typed(node.right)
    name = dotted(node.value if isinstance(node, ast.Subscript) else node).rsplit(".", 1)[-1]
    if name in DICT_NAMES:
        return True
    if isinstance(node, ast.Subscript) and name in WRAPPERS:
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(dict_typed(n) for n in inner)
    return False


def dict_signatures(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, function) of each dict-typed parameter or return annotation (one per annotation)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            parameters = (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
            annotations = [p.annotation for p in parameters if p is not None] + [node.returns]
            found += [(node.lineno, node.name) for n in annotations if n is not None and dict_typed(n)]
    return found


def keyed_writes(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of each write into a mapping in place: `x["k"] = ...` (a str-constant key, any
    assignment target), and every `.setdefault(...)` and `.update(...)` call, whatever its arguments."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_str(node.slice) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, f"[{node.slice.value!r}] ="))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("setdefault", "update"):
                found.append((node.lineno, f".{node.func.attr}()"))
    return found


def keyed_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of each string-keyed read: `x["k"]` read (not `Literal["a"]`), `.get("k")`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_str(node.slice) and isinstance(node.ctx, ast.Load):
            if dotted(node.value).rsplit(".", 1)[-1] != "Literal":
                found.append((node.lineno, f"[{node.slice.value!r}]"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if node.args and is_str(node.args[0]):
                found.append((node.lineno, f".get({node.args[0].value!r})"))
    return found


def module_figures(tree: ast.Module) -> Counter:
    """The per-module figures (the module docstring's list) of one parsed module."""
    reads = keyed_reads(tree)
    figures = Counter(subscript_reads=sum(not w.startswith(".") for _, w in reads))
    figures["get_reads"] = len(reads) - figures["subscript_reads"]
    importlib_roots = {"importlib"} | {
        alias.asname or alias.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "importlib"
        for alias in n.names
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_str(node.slice):
            figures["string_key_writes"] += isinstance(node.ctx, ast.Store)
        elif isinstance(node, ast.Call):
            method = node.func.attr if isinstance(node.func, ast.Attribute) else None
            keyed = bool(node.args) and is_str(node.args[0])
            figures["string_key_writes"] += method == "setdefault" and keyed
            figures["update_calls"] += method == "update"
            figures["importlib_calls"] += dotted(node.func).split(".")[0] in importlib_roots
    figures["dict_signatures"] = len(dict_signatures(tree))
    figures["string_keyed_reads"] = figures["subscript_reads"] + figures["get_reads"]
    return figures


def commit_of(root: Path) -> str | None:
    """The short hash of the checkout's HEAD (None outside a git checkout)."""
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return commit.stdout.strip() or None


def measure(root: Path) -> dict:
    """{"packages": {package: figures}, "total": figures, "circles": [...], ...} of the checkout at `root`."""
    found = packages(root)
    graph = module_imports(root, found)
    rows = {package: Counter({key: 0 for key in COLUMNS}) for package in found}
    for name, path in module_files(root, found).items():
        text = path.read_text(encoding="utf-8")
        row = rows[name.split(".")[0]]
        row.update(module_figures(ast.parse(text)))
        row.update(modules=1, lines=len(text.splitlines()), arrows=len(graph[name]))
        row["arrows_between_packages"] += sum(t.split(".")[0] != name.split(".")[0] for t in graph[name])
    total = Counter({key: 0 for key in COLUMNS})
    for row in rows.values():
        total.update(row)
    circles = import_circles(graph)
    return {
        "root": str(root),
        "commit": commit_of(root),
        "packages": {package: dict(row) for package, row in rows.items()},
        "total": {**total, "circles": len(circles), "floors": floors(graph)},
        "circles": circles,
    }


def markdown(figures: dict) -> str:
    """The figures as a Markdown table, a row per package and the total, and a line on the graph."""
    lines = [f"| package | {' | '.join(COLUMNS.values())} |", "|---" * (len(COLUMNS) + 1) + "|"]
    for package, row in [*figures["packages"].items(), ("**total**", figures["total"])]:
        lines.append(f"| {package} | {' | '.join(f'{row[key]:,}' for key in COLUMNS)} |")
    total = figures["total"]
    lines.append("")
    lines.append(
        f"Import graph at {figures['commit'] or figures['root']}: {total['modules']} modules, {total['arrows']} arrows "
        f"({total['arrows_between_packages']} between packages), {total['circles']} circles, "
        f"{total['floors']} floors" + "".join(f"\n- circle: {' -> '.join(c)}" for c in figures["circles"])
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE as JSON")
    args = parser.parse_args(argv)
    if not packages(args.root):
        parser.error(f"{args.root} holds no package (a top-level folder with an __init__.py)")
    figures = measure(args.root.resolve())
    print(markdown(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
