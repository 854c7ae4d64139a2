"""The JSON Schemas editors read (tools/config_schemas.py -> configs/*.schema.json): current, and
checked by an independent validator (jsonschema): every shipped config, as written and with its
`base:` files resolved, and every family file is valid; what load_config refuses, they refuse too."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from helpers import ROOT

from settings.config import load_config
from settings.yaml_files import StrictLoader, read_yaml
from study.read.family import load_family
from tests.study.read import test_family
from tools import config_schemas
from utils.errors import ConfigError

CONFIGS = ROOT / "configs"
CONFIG_FILES = sorted(p for p in CONFIGS.rglob("*.yaml") if p.parent.name != "findings")
FAMILIES = sorted(CONFIGS.rglob("findings/*.yaml"))


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((CONFIGS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def as_written(path: Path) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=StrictLoader)


def test_the_schema_files_are_current(capsys) -> None:
    assert config_schemas.main(["--check"]) == 0, capsys.readouterr().err
    assert CONFIG_FILES and FAMILIES


def test_a_changed_schema_makes_them_stale(monkeypatch) -> None:
    made = config_schemas.schemas()
    monkeypatch.setattr(config_schemas, "schemas", lambda: {**made, "schema.json": made["schema.json"] + " "})
    assert config_schemas.main(["--check"]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_shipped_config_is_valid_as_written_and_resolved(path: Path) -> None:
    validator("overlay.schema.json").validate(as_written(path))
    validator("schema.json").validate(read_yaml(path))


@pytest.mark.parametrize("path", FAMILIES, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_family_file_is_valid(path: Path) -> None:
    validator("family.schema.json").validate(as_written(path))


FAMILY_REFUSED = test_family.REFUSED + test_family.REFUSED_PLANS
REFUSED = [
    {"model": {"d_modle": 32}},  # an unknown key
    {"model": {"activation": "tanh"}},  # not a choice
    {"model": {"d_model": 0}},  # below its bound
    {"model": {"d_model": 1.5}},  # not an integer
    {"model": {"norm_first": 1}},  # not a boolean
    {"training": {"betas": [0.9, 1.0]}},  # an element out of bounds
    {"training": {"betas": [0.9]}},  # not a pair
    {"evaluation": {"length_buckets": [1, -2]}},
    {"model": {"positional": {"name": "sinusoidal", "theta": 500.0}}},  # another encoding's option
    {"model": {"positional": {"name": "rope", "layout": "diagonal"}}},
    {"model": {"positional": {"name": "nope"}}},
]


@pytest.mark.parametrize("raw", REFUSED, ids=lambda raw: json.dumps(raw))
def test_what_load_config_refuses_the_schema_refuses(raw: dict) -> None:
    with pytest.raises(ConfigError):
        load_config(raw=raw)
    assert list(validator("schema.json").iter_errors(raw))


def test_a_valid_config_is_valid_under_both() -> None:
    raw = {"model": {"d_model": 64, "num_heads": 4, "positional": {"name": "rope", "theta": 500.0}}}
    assert load_config(raw=raw).model.positional.options["theta"] == 500.0
    validator("schema.json").validate(raw)
    written = {"base": ["a.yaml", "b.yaml"], **raw}
    validator("overlay.schema.json").validate(written)
    assert list(validator("schema.json").iter_errors(written))  # a resolved config names no base


@pytest.mark.parametrize("text, says, schema", FAMILY_REFUSED, ids=[says[:60] for _, says, _ in FAMILY_REFUSED])
def test_family_schema_refuses_what_load_family_refuses(tmp_path: Path, text: str, says: str, schema: bool) -> None:
    """Each family file the loader refuses (tests/study/read/test_family.py), the schema generated from the
    same model refuses too, but for what a schema cannot say (a rule across keys, a file that must
    exist under configs/, the YAML itself): those it accepts, and the list says so."""
    path = tmp_path / "headline.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_family(str(path))
    try:
        raw = as_written(path)
    except yaml.YAMLError:  # refused as YAML, before any schema
        assert not schema
        return
    assert bool(list(validator("family.schema.json").iter_errors(raw))) == schema


def test_load_config_needs_no_import_order_in_a_fresh_interpreter() -> None:
    code = "from settings.config import load_config; print(load_config('configs/demo/rope.yaml').model.positional.name)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "rope"
