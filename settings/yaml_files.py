"""Reading a config file's YAML: strictly (a key given twice, an alias bomb and a non-UTF-8 file are
one line naming the file), merged over its `base:` chain. `settings/config.py` turns the result into
the schema's dataclasses."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from utils.errors import ConfigError


def read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """Read a YAML file and merge it over its `base:` chain."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"config inheritance loop: {' -> '.join(str(p) for p in (*seen, path))}")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.load(f, Loader=StrictLoader)
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path} is not UTF-8 text (it holds the byte {e.object[e.start : e.start + 1]!r}): "
            f"a config is a YAML file; save it as UTF-8"
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: sections nested too deeply for a config") from None
    if raw is None:
        raise ConfigError(
            f"{path} is empty: a config needs at least `base:` or the keys it sets (see configs/demo/rope.yaml)"
        )
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys, got {type(raw).__name__}")
    base = raw.pop("base", None)
    if base is None:
        return raw
    bases = base if isinstance(base, list) else [base]
    if not all(isinstance(b, str) and b.strip() for b in bases):
        raise ConfigError(
            f"{path}: base takes a path or a list of paths (relative to this file), "
            f"e.g. `base: ../base.yaml`; got {base!r}"
        )
    merged: dict = {}
    for b in bases:
        merged = deep_merge(merged, read_yaml(path.parent / b, (*seen, path)))
    return deep_merge(merged, raw)


# A YAML alias repeats the node it names, and nested aliases multiply (the "billion laughs": nine
# lines that expand to 10^9 values). A config is a few hundred values; more than this is refused.
MAX_EXPANDED_NODES = 100_000
MERGE_TAG = "tag:yaml.org,2002:merge"


def _expanded_size(node: yaml.Node, sizes: dict, open_nodes: set) -> int:
    """How many nodes `node` becomes with every alias expanded (memoised by node: linear time)."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in open_nodes:
        raise yaml.composer.ComposerError(None, None, "an alias refers to a node that contains it", node.start_mark)
    open_nodes.add(id(node))
    children: list = []
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    size = 1 + sum(_expanded_size(child, sizes, open_nodes) for child in children)
    open_nodes.discard(id(node))
    sizes[id(node)] = size
    return size


class StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (PyYAML keeps
    the last one silently, so a second `model:` section would replace the first without a word),
    and that a document whose aliases expand beyond MAX_EXPANDED_NODES is refused. Merge keys
    (`<<: *defaults`) work as in YAML: the mapping's own keys override the merged ones."""

    def construct_document(self, node):
        size = _expanded_size(node, {}, set())
        if size > MAX_EXPANDED_NODES:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"its aliases (*name) expand to {size:,} values, more than the {MAX_EXPANDED_NODES:,} a config "
                f"may hold: write the values out, or use fewer nested aliases",
                node.start_mark,
            )
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:  # `<<:` merges another mapping: not a key of this one
                continue
            if not isinstance(key_node, yaml.ScalarNode):  # `[a, b]: 1` or `{a: 1}: 2`: no key a config has
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"a {'list' if isinstance(key_node, yaml.SequenceNode) else 'mapping'} is used as a key on line "
                    f"{key_node.start_mark.line + 1}: a key is a name (quote it if it holds brackets or braces)",
                    key_node.start_mark,
                )
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first on line {seen[key] + 1}, again on line "
                    f"{key_node.start_mark.line + 1}): keep one of them",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class NumbersLoader(StrictLoader):
    """StrictLoader reading numbers as YAML 1.2 does: `1e-1`, `1E5`, `-.5`, `1.0e5` are floats (YAML 1.1,
    PyYAML's, reads them as text: `--set model.dropout=1e-1` was the text '1e-1', unequal to the trained
    0.1). Only floats change: an int, a bool or null reads as before (1.1's resolvers are tried first).
    `--set` values are read with it; config files keep StrictLoader, whose float keys read such text as
    a number anyway (settings/types.py), so a committed config means what it meant."""


NumbersLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def deep_merge(base: dict, override: dict) -> dict:
    """`base` with `override`'s keys, sections merged key by key (both copied, neither changed)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
