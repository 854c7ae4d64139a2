"""The config schema's declarations (settings/schema.py): every number declares its bounds and
what 0 and null do; an encoding option's default role is the schema's; batch budgets and evaluation
breakdowns are runtime keys, which do not split a configuration."""

from __future__ import annotations

from helpers import ROOT

from settings.config import load_config, to_dict
from settings.key_roles import option_role, role_of
from settings.schema import RUNTIME, TRAINING, ModelConfig
from study.read.run_records import experiment_settings
from tools.config_schemas import json_schema
from tools.readme_results import _key_roles_table

CONFIG = ROOT / "configs" / "demo" / "rope.yaml"


def numeric_keys():
    """(dotted key, its JSON Schema, the schema of a number in it) of every number, pair or list of
    numbers of the schema (configs/schema.json's source), sections unfolded."""
    schema = json_schema()
    sections = [("", schema)]
    while sections:
        prefix, section = sections.pop()
        for name, prop in section["properties"].items():
            if "$ref" in prop:
                sections.append((f"{prefix}{name}.", schema["$defs"][prop["$ref"].split("/")[-1]]))
                continue
            for option in prop.get("anyOf", [prop]):
                items = option.get("prefixItems", [option.get("items", option)])
                numbers = [i for i in items if i.get("type") in ("integer", "number")]
                if numbers:
                    yield f"{prefix}{name}", prop, numbers[0]


def test_every_number_declares_its_bounds_and_what_0_and_null_do() -> None:
    keys = list(numeric_keys())
    assert len(keys) > 50
    for key, prop, number in keys:
        low = number.get("minimum", number.get("exclusiveMinimum"))
        assert low is not None, f"{key} declares no lower bound (setting(low=/above=))"
        if number.get("minimum") == 0:  # 0 is accepted: the schema says what it does
            assert prop.get("zero"), f"{key} accepts 0 but does not say what 0 does (zero=)"
        if {"type": "null"} in prop.get("anyOf", []):
            assert prop.get("null"), f"{key} accepts null but does not say what null does (null=)"


def test_batch_budgets_and_evaluation_breakdowns_do_not_split_a_configuration() -> None:
    one = to_dict(load_config(CONFIG))
    other = to_dict(load_config(CONFIG, ["decoding.max_tokens=123", "evaluation.length_buckets=[1, 5]"]))
    other["evaluation"]["concat"] = [1, 2]
    assert experiment_settings(one) == experiment_settings(other)
    beam = to_dict(load_config(CONFIG, ["decoding.beam_size=2"]))
    assert experiment_settings(one) != experiment_settings(beam)  # how it was decoded still does
    assert role_of("evaluation.concat", "rope") == RUNTIME == role_of("decoding.max_tokens", "rope")


def test_an_options_default_role_is_the_schemas_declaration(monkeypatch) -> None:
    import settings.key_roles

    positional = ModelConfig.__pydantic_fields__["positional"]
    assert not positional.json_schema_extra  # the model section's role (experiment), inherited
    assert option_role("rope", "theta") == role_of("model.d_model", "rope")
    monkeypatch.setattr(positional, "json_schema_extra", {"role": TRAINING})
    settings.key_roles._schema_roles.cache_clear()
    monkeypatch.setattr(settings.key_roles, "_schema_roles", settings.key_roles._schema_roles.__wrapped__)
    assert option_role("rope", "theta") == TRAINING  # one source: the schema
    assert "An encoding's options are training keys" in _key_roles_table()
