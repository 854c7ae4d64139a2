"""pydantic's errors worded as the config's one-line errors (settings/errors.py): an unknown key
with the valid keys and a close match, a value that is not a choice with the choices, a wrong type
naming the key, every bound broken at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import ROOT, config_error, small_config

from settings.config import ConfigError, ExperimentConfig, load_config


def test_unknown_nested_key_names_key_lists_valid_keys_and_suggests(tmp_path: Path):
    msg = config_error(small_config(tmp_path), ["model.positional.nmae=rope"])
    assert "model.positional.nmae" in msg
    assert "Did you mean 'name'" in msg and "Options of 'sinusoidal': randomized, max_position." in msg
    msg = config_error(small_config(tmp_path), ["model.positional.name=none", "model.positional.nmae=x"])
    assert "'none' takes no options" in msg


def test_unknown_top_level_key(tmp_path: Path):
    msg = config_error(small_config(tmp_path), ["traning.lr=0.1"])
    assert "'traning'" in msg and "Did you mean 'training'" in msg
    for field in dataclasses.fields(ExperimentConfig):
        assert field.name in msg


def test_unknown_key_in_file(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: {d_model: 32, num_heads: 4, num_layers: 2}\n")
    msg = str(pytest.raises(ConfigError, load_config, path).value)
    assert "model.num_layers" in msg and "num_encoder_layers" in msg


def test_bad_literal_lists_valid_choices(tmp_path: Path):
    msg = config_error(small_config(tmp_path), ["training.optimizer=sgd"])
    assert "training.optimizer" in msg and "'sgd'" in msg
    assert "adam" in msg and "adamw" in msg


def test_wrong_type_names_the_key(tmp_path: Path):
    path = small_config(tmp_path)
    msg = config_error(path, ["training.epochs=abc"])
    assert "training.epochs" in msg and "integer" in msg
    msg = config_error(path, ["model.norm_first=maybe"])
    assert "model.norm_first" in msg
    msg = config_error(path, ["training.epochs=2.5"])
    assert "training.epochs" in msg
    msg = config_error(path, ["training.betas=[0.9]"])
    assert "training.betas" in msg


def test_every_bound_broken_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(ROOT / "configs" / "demo" / "rope.yaml", ["training.lr=-1", "model.dropout=2"])
    message = str(error.value)
    assert message.endswith(
        "with its --set values: 2 config values are out of bounds:\n"
        "  model.dropout must be below 1, got 2.0\n  training.lr must be above 0, got -1.0"
    )


@pytest.mark.parametrize(
    "override, says",
    [
        ("model.d_model=abc", "config key 'model.d_model' must be an integer, got 'abc'"),
        ("model.d_model=1.5", "config key 'model.d_model' must be an integer, got 1.5"),
        ("model.d_model=true", "config key 'model.d_model' must be an integer, got True"),
        ("model.norm_first=1", "config key 'model.norm_first' must be true or false, got 1"),
        ("training.lr=[1]", "config key 'training.lr' must be a number, got [1]"),
        ("model.dropout=nan", "config key 'model.dropout' must be a finite number, got nan"),
        ("name=[1]", "config key 'name' must be a string, got [1]"),
        ("name=2020-01-01", "config key 'name' must be a string, got datetime.date(2020, 1, 1)"),
        ("evaluation.length_buckets=5", "config key 'evaluation.length_buckets' must be a list, got 5"),
        ("data.train=5", "config key 'data.train' must be a mapping, got 5"),
        ("training.betas=[0.9]", "config key 'training.betas' must be a list of 2 numbers, got [0.9]"),
        ("training.betas=0.9", "config key 'training.betas' must be a list of 2 numbers, got 0.9"),
        ("model.activation=tanh", "invalid value 'tanh' for config key 'model.activation'. Valid choices: relu, gelu"),
        ("decoding.compute_type=int4", "for config key 'decoding.compute_type'. Valid choices: float32, int8,"),
        ("evaluation.length_buckets=[1, 'a']", "config key 'evaluation.length_buckets' must be an integer, got 'a'"),
    ],
)
def test_a_wrong_type_is_one_line_naming_the_key_and_the_value_as_written(
    tmp_path: Path, override: str, says: str
) -> None:
    assert says in config_error(small_config(tmp_path), [override])


def test_a_key_or_type_error_comes_alone_before_the_bounds(tmp_path: Path) -> None:
    msg = config_error(small_config(tmp_path), ["model.d_model=0", "model.dropout=2", "model.fo=1"])
    assert msg.startswith("--set model.fo=1: unknown config key 'model.fo'.") and "\n" not in msg, msg
    msg = config_error(small_config(tmp_path), ["model.d_model=0", "evaluation.length_buckets=[1, -2, -3]"])
    assert msg.endswith(
        "2 config values are out of bounds:\n  model.d_model must be at least 1, got 0\n"
        "  each of evaluation.length_buckets must be at least 0, got [1, -2, -3]"
    ), msg
