"""The open model.positional section (settings/positional.py): the encoding's name checked against
the registry, its options by that encoding (another encoding's option named, a close match
suggested), the previous release's flat names loading with a note, and a new encoding's options
declared in one place."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import yaml
from helpers import config_error, small_config

from models.build import build_model
from models.positional_encodings import POSITIONAL_ENCODINGS
from models.positional_encodings.rotary import RopeOptions
from settings.config import PositionalConfig, dump_config, load_config


def test_unknown_positional_encoding_lists_registry(tmp_path: Path):
    msg = config_error(small_config(tmp_path), ["model.positional.name=foo"])
    assert "model.positional.name" in msg and "'foo'" in msg
    for name in POSITIONAL_ENCODINGS:
        assert name in msg


def test_an_option_of_another_encoding_is_refused_naming_both(tmp_path: Path):
    """Each encoding declares its options: `clip_distance` under rope used to be accepted and ignored."""
    msg = config_error(small_config(tmp_path), ["model.positional.name=rope", "model.positional.clip_distance=8"])
    assert "'model.positional.clip_distance' is not an option of the 'rope' encoding" in msg
    assert "(it is one of: shaw)" in msg and "theta, fraction, layout, cross_attention" in msg
    msg = config_error(small_config(tmp_path), ["model.positional.name=shaw", "model.positional.clip_distanse=8"])
    assert "Did you mean 'clip_distance'" in msg
    cfg = load_config(small_config(tmp_path), ["model.positional.name=shaw", "model.positional.clip_distance=8"])
    assert cfg.model.positional.options == {"cross_attention": False, "clip_distance": 8}


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["model.positional.name=rope", "model.positional.fraction=0"], "model.positional.fraction"),
        (["model.positional.name=rope", "model.num_heads=32"], "even head dimension"),  # 32/32 = 1
        (["model.positional.name=rope", "model.positional.layout=spiral"], "model.positional.layout"),
        (["model.positional.name=t5_bias", "model.positional.num_buckets=2"], "model.positional.num_buckets"),
        (["model.positional.name=t5_bias", "model.positional.max_distance=16"], "model.positional.max_distance"),
        (["model.positional.name=shaw", "model.positional.clip_distance=0"], "model.positional.clip_distance"),
        (
            ["model.positional.name=learnable", "model.positional.max_positions=100", "data.max_len=100"],
            "model.positional.max_positions",
        ),
        (["model.positional.name=alibi", "model.positional.cross_attention=maybe"], "model.positional.cross_attention"),
        (["training.cuda_graphs=true"], "training.compile: true"),  # graphs replay the compiled step
        (["training.compile=true", "training.cuda_graphs=true", "training.update_freq=2"], "training.update_freq: 1"),
    ],
)
def test_encoding_options_are_checked_by_their_encoding(tmp_path: Path, overrides: list[str], key: str):
    msg = config_error(small_config(tmp_path), overrides)
    assert key in msg


def test_previous_release_flat_option_names_still_load_with_a_note(tmp_path: Path, capsys):
    """A config.yaml saved by the previous release holds every encoding's options in one flat bag;
    it loads (renamed, the other encodings' keys dropped as they were ignored) and says so once."""
    old = {
        "name": "rope",
        "max_positions": 1024,
        "rope_theta": 500.0,
        "rope_fraction": 0.5,
        "rope_layout": "half",
        "cross_attention": True,
        "num_buckets": 32,
        "max_distance": 128,
        "clip_distance": 16,
        "shape_max_shift": 100,
        "shape_inference_shift": None,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"model": {"d_model": 32, "num_heads": 4, "positional": old}}))
    import settings.positional

    settings.positional._legacy_noted = False
    cfg = load_config(path)
    rope = {**dataclasses.asdict(RopeOptions()), "theta": 500.0, "fraction": 0.5, "cross_attention": True}
    assert cfg.model.positional == PositionalConfig(name="rope", options=rope)
    note = capsys.readouterr().err
    assert "rope_theta -> theta" in note and "previous release" in note
    load_config(path)
    assert capsys.readouterr().err == ""  # once per process
    # The new spelling loads silently, and a dump writes it.
    dump_config(cfg, tmp_path / "new.yaml")
    assert yaml.safe_load((tmp_path / "new.yaml").read_text())["model"]["positional"] == {"name": "rope", **rope}
    assert load_config(tmp_path / "new.yaml") == cfg and capsys.readouterr().err == ""


def test_a_new_encoding_declares_its_options_in_one_place(tmp_path: Path):
    """The worked example of docs/DESIGN.md: an encoding registered with an Options dataclass and its
    check is configurable, checked and built with no change to the config code."""
    from dataclasses import dataclass

    from models.positional_encodings import POSITIONAL_ENCODINGS as registry
    from models.positional_encodings import SinusoidalPositionalEncoding, register, sinusoidal_table
    from models.positional_options import ENCODING_OPTIONS, NoOptions

    @dataclass
    class ScaledOptions(NoOptions):
        scale: float = 1.0

        def check(self, *, head_dim, max_len):
            if self.scale <= 0:
                raise ValueError(f"model.positional.scale must be positive, got {self.scale}")

    @register("scaled_sinusoidal")
    class ScaledSinusoidal(SinusoidalPositionalEncoding):
        Options = ScaledOptions

        def __init__(self, d_model, num_heads, causal, scale=1.0):
            super().__init__(d_model, num_heads, causal)
            self.scale = scale

        def add_to_embeddings(self, x, positions):
            return x + self.scale * sinusoidal_table(positions, self.d_model).to(x.dtype)

    try:
        path = small_config(tmp_path)
        cfg = load_config(path, ["model.positional.name=scaled_sinusoidal", "model.positional.scale=0.5"])
        model = build_model(cfg.model, 1000, 1000, 0)
        assert isinstance(model.encoder_pe, ScaledSinusoidal) and model.encoder_pe.scale == 0.5
        x, positions = torch.zeros(1, 3, cfg.model.d_model), torch.arange(3)
        torch.testing.assert_close(
            model.encoder_pe.add_to_embeddings(x, positions), 0.5 * sinusoidal_table(positions, cfg.model.d_model)[None]
        )
        src = torch.tensor([[5, 6, 7]])
        with torch.no_grad():
            half = model.eval().encode(src).memory
            model.encoder_pe.scale = 1.0
            assert not torch.allclose(model.encode(src).memory, half)  # the scale reaches the encoder
        assert "model.positional.scale must be positive" in config_error(
            path, ["model.positional.name=scaled_sinusoidal", "model.positional.scale=-1"]
        )
        assert "not an option of the 'scaled_sinusoidal'" in config_error(
            path, ["model.positional.name=scaled_sinusoidal", "model.positional.theta=2"]
        )
    finally:
        del registry["scaled_sinusoidal"], ENCODING_OPTIONS["scaled_sinusoidal"]


def test_an_option_written_as_text_that_is_a_number_is_read_as_one(tmp_path: Path) -> None:
    cfg = load_config(small_config(tmp_path), ["model.positional.name=rope", "model.positional.theta='1e4'"])
    assert cfg.model.positional.options["theta"] == 10000.0
    msg = config_error(small_config(tmp_path), ["model.positional.name=rope", "model.positional.theta=true"])
    assert "config key 'model.positional.theta' must be a number, got True" in msg


def test_the_json_schema_has_one_branch_per_encoding_with_its_options() -> None:
    schema = PositionalConfig.__get_pydantic_json_schema__(None, None)
    branches = {b["properties"]["name"]["const"]: b for b in schema["oneOf"]}
    assert set(branches) == set(POSITIONAL_ENCODINGS)
    for name, encoding in POSITIONAL_ENCODINGS.items():
        options = {f.name for f in dataclasses.fields(encoding.Options)}
        assert set(branches[name]["properties"]) == {"name", *options}, name
        assert ("required" in branches[name]) == (name != "sinusoidal")  # a section without name is sinusoidal
