"""The config schema's declarations (utils/config_schema.py): every number declares its bounds and
what 0 and null do; an encoding option's default role is the schema's; batch budgets and evaluation
breakdowns are runtime keys, which do not split a configuration."""

from __future__ import annotations

import dataclasses
import typing

from helpers import ROOT

from evaluation.run_groups import experiment_settings
from utils.config import load_config, to_dict
from utils.config_schema import RUNTIME, TRAINING, ExperimentConfig, PositionalConfig
from utils.key_roles import option_role, role_of, roles_markdown

CONFIG = ROOT / "configs" / "demo" / "rope.yaml"


def numeric_keys(cls: type = ExperimentConfig, prefix: str = ""):
    """(dotted key, field, type without Optional) of every number, pair or list of numbers."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and tp is not PositionalConfig:
            yield from numeric_keys(tp, f"{prefix}{f.name}.")
            continue
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = args[0] if typing.get_origin(tp) is typing.Union else tp
        element = typing.get_args(inner)[0] if typing.get_origin(inner) in (list, tuple) else inner
        if element in (int, float):
            yield f"{prefix}{f.name}", f, tp


def test_every_number_declares_its_bounds_and_what_0_and_null_do() -> None:
    keys = list(numeric_keys())
    assert len(keys) > 50
    for key, f, tp in keys:
        bounds = f.metadata.get("bounds")
        assert bounds, f"{key} declares no bounds (setting(low=/above=/high=/below=))"
        low = bounds.get("low", bounds.get("above"))
        assert low is not None, f"{key} declares no lower bound"
        if bounds.get("low") == 0:  # 0 is accepted: the schema says what it does
            assert f.metadata.get("zero"), f"{key} accepts 0 but does not say what 0 does (zero=)"
        if type(None) in typing.get_args(tp):
            assert f.metadata.get("null"), f"{key} accepts null but does not say what null does (null=)"


def test_batch_budgets_and_evaluation_breakdowns_do_not_split_a_configuration() -> None:
    one = to_dict(load_config(CONFIG))
    other = to_dict(load_config(CONFIG, ["decoding.max_tokens=123", "evaluation.length_buckets=[1, 5]"]))
    other["evaluation"]["concat"] = [1, 2]
    assert experiment_settings(one) == experiment_settings(other)
    beam = to_dict(load_config(CONFIG, ["decoding.beam_size=2"]))
    assert experiment_settings(one) != experiment_settings(beam)  # how it was decoded still does
    assert role_of("evaluation.concat", "rope") == RUNTIME == role_of("decoding.max_tokens", "rope")


def test_an_options_default_role_is_the_schemas_declaration(monkeypatch) -> None:
    options = next(f for f in dataclasses.fields(PositionalConfig) if f.name == "options")
    assert option_role("rope", "theta") == options.metadata["role"]
    monkeypatch.setattr(options, "metadata", {**options.metadata, "role": TRAINING})
    assert option_role("rope", "theta") == TRAINING  # one source: the schema
    assert "An encoding's options are training keys" in roles_markdown()
