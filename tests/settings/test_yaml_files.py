"""Reading config YAML (settings/yaml_files.py): `base:` files merged key by key down a chain of
relative paths, a loop or a missing file named, scientific notation read as a float."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from models.positional_encodings.rotary import RopeOptions
from settings.config import ConfigError, ModelConfig, PositionalConfig, load_config


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_base_inheritance_merges_nested_keys(tmp_path: Path):
    write(
        tmp_path / "parent.yaml",
        "name: parent\n"
        "model:\n  d_model: 64\n  num_heads: 4\n  ffn_dim: 128\n"
        "  positional: {name: rope, theta: 500.0}\n"
        "training: {lr: 0.002, epochs: 3}\n",
    )
    child = write(
        tmp_path / "child.yaml",
        "base: parent.yaml\n"
        "name: child\n"
        "model:\n  ffn_dim: 256\n  positional: {cross_attention: true}\n"
        "training: {epochs: 5}\n",
    )
    cfg = load_config(child)
    assert cfg.name == "child"
    assert (cfg.model.d_model, cfg.model.num_heads, cfg.model.ffn_dim) == (64, 4, 256)
    # Nested section merged key by key, not replaced.
    assert cfg.model.positional == PositionalConfig(
        name="rope", options={**dataclasses.asdict(RopeOptions()), "theta": 500.0, "cross_attention": True}
    )
    assert (cfg.training.lr, cfg.training.epochs) == (0.002, 5)
    # Keys set nowhere keep their schema defaults.
    assert cfg.model.num_encoder_layers == ModelConfig().num_encoder_layers


def test_base_chain_and_relative_paths(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    write(tmp_path / "root.yaml", "model: {d_model: 64, num_heads: 4}\nseed: 7\n")
    write(tmp_path / "sub" / "mid.yaml", "base: ../root.yaml\nseed: 8\nmodel: {num_heads: 8}\n")
    leaf = write(tmp_path / "sub" / "leaf.yaml", "base: mid.yaml\nname: leaf\n")
    cfg = load_config(leaf)
    assert (cfg.seed, cfg.model.d_model, cfg.model.num_heads, cfg.name) == (8, 64, 8, "leaf")


def test_inheritance_loop_raises(tmp_path: Path):
    write(tmp_path / "a.yaml", "base: b.yaml\nname: a\n")
    write(tmp_path / "b.yaml", "base: a.yaml\nname: b\n")
    with pytest.raises(ConfigError, match="loop"):
        load_config(tmp_path / "a.yaml")
    write(tmp_path / "self.yaml", "base: self.yaml\n")
    with pytest.raises(ConfigError, match="loop"):
        load_config(tmp_path / "self.yaml")


def test_missing_file_raises_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    write(tmp_path / "child.yaml", "base: missing_parent.yaml\n")
    with pytest.raises(ConfigError, match="missing_parent.yaml"):
        load_config(tmp_path / "child.yaml")


def test_yaml_file_scientific_notation_is_a_float(tmp_path: Path):
    """Same as above, written in a config file (`lr: 5e-4`)."""
    path = write(tmp_path / "sci.yaml", "model: {d_model: 32, num_heads: 4}\ntraining: {lr: 5e-4}\n")
    assert load_config(path).training.lr == pytest.approx(5e-4)


def test_set_values_read_numbers_as_yaml_1_2_and_nothing_else_changes() -> None:
    """Issue 75: `--set` values read floats as YAML 1.2 does (1.1 reads `1e-1` as text); ints, bools,
    null and text read as before, and config files keep their reader (StrictLoader)."""
    from settings.config import parse_override
    from settings.yaml_files import StrictLoader

    floats = {"1e-1": 0.1, "1E5": 1e5, "-1e-3": -1e-3, ".5": 0.5, "-.5": -0.5, "+1.0e5": 1e5, "0.1": 0.1}
    same = {"10": 10, "010": 8, "0x1F": 31, "-3": -3, "yes": True, "false": False, "null": None, "1e": "1e"}
    for text, value in {**floats, **same}.items():
        read = parse_override(f"k={text}").value
        assert read == value and type(read) is type(value), (text, read)
    assert yaml.load("1e-1", Loader=StrictLoader) == "1e-1"  # a config file's text, read by its float keys
    assert parse_override("k=[1e-1, {a: 2E0}]").value == [0.1, {"a": 2.0}]
