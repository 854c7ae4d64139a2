"""Config loading and validation (utils/config.py) and that every shipped config builds a model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import yaml

from models import POSITIONAL_ENCODINGS, build_model
from models.positional_encodings.rotary import RopeOptions
from utils.config import ConfigError, ExperimentConfig, PositionalConfig, load_config, to_dict
from utils.files import dump_config

ROOT = Path(__file__).resolve().parents[2]


CONFIG_DIR = ROOT / "configs"


# every experiment config; not a study's declared findings (configs/<study>/findings/) nor a partial
# file that configs put over another one (configs/report/size.yaml: a `base:` list item)
PARTIAL = {CONFIG_DIR / "report" / "size.yaml"}


ALL_CONFIGS = sorted(
    p
    for p in [*CONFIG_DIR.rglob("*.yaml"), *CONFIG_DIR.rglob("*.yml")]
    if p.parent.name != "findings" and p not in PARTIAL
)


V = 1000


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def base_config_path(tmp_path: Path) -> Path:
    """A small valid config file (defaults are the report's model; these keys make it tiny)."""
    return write(tmp_path / "small.yaml", "model: {d_model: 32, num_heads: 4}\n")


def test_configs_are_found():
    assert ALL_CONFIGS, f"no YAML files found under {CONFIG_DIR}"
    assert any(p.parent.name == "demo" for p in ALL_CONFIGS)
    assert any(p.parent.name == "iwslt2017" for p in ALL_CONFIGS)


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_config_loads_and_builds_a_model(path: Path):
    cfg = load_config(path)
    assert isinstance(cfg, ExperimentConfig)
    assert cfg.model.positional.name in POSITIONAL_ENCODINGS
    # share_embeddings: false needs no special sizes: the same V is valid on both sides.
    model = build_model(cfg.model, V, V, 0)
    num_params = sum(p.numel() for p in model.parameters())
    assert num_params > 0
    # The embedding tables have the requested shape.
    assert model.src_embed.weight.shape == (V, cfg.model.d_model)
    assert model.tgt_embed.weight.shape == (V, cfg.model.d_model)
    assert (model.src_embed is model.tgt_embed) == cfg.model.share_embeddings
    del model


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_config_round_trips_through_dump(path: Path, tmp_path: Path):
    cfg = load_config(path)
    out = tmp_path / "config.yaml"
    dump_config(cfg, out)
    again = load_config(out)
    assert again == cfg
    assert again.training.betas == cfg.training.betas and isinstance(again.training.betas, tuple)


IWSLT_EXPERIMENTS = sorted((CONFIG_DIR / "iwslt2017").glob("transformer_512dh8_e6d6_epochbased_*.yaml"))


@pytest.mark.parametrize("path", IWSLT_EXPERIMENTS, ids=lambda p: p.stem)
def test_iwslt2017_configs_reproduce_the_report_setup(path: Path):
    """DESIGN.md: the report's setup must stay reproducible as its own configs."""
    cfg = load_config(path)
    m, t = cfg.model, cfg.training
    assert (m.d_model, m.num_heads, m.num_encoder_layers, m.num_decoder_layers, m.ffn_dim) == (512, 8, 6, 6, 2048)
    assert m.dropout == 0.1 and cfg.data.max_len == 256
    assert (t.batch_size, t.max_tokens, t.epochs) == (56, None, 20)
    assert (t.optimizer, t.lr, t.betas, t.eps, t.label_smoothing) == ("adam", 3e-4, (0.9, 0.98), 1e-8, 0.0)
    s = t.schedule
    assert (s.name, s.unit, s.warmup, s.hold, s.decay) == ("warmup_exponential", "epoch", 6, 1, 0.35)
    assert t.checkpoint_metric == "valid_loss"
    assert cfg.data.source == "iwslt2017" and (cfg.data.src_lang, cfg.data.tgt_lang) == ("fr", "en")
    assert cfg.tokenizer.type == "pretrained" and cfg.tokenizer.name == "Helsinki-NLP/opus-mt-fr-en"
    assert m.share_embeddings is False
    # The encoding named in the file name, with cross-attention positions only for the ablation.
    suffix = path.stem.removeprefix("transformer_512dh8_e6d6_epochbased_")
    assert m.positional.name == suffix.removesuffix("_crossattn")
    assert m.positional.options.get("cross_attention", False) is suffix.endswith("_crossattn")


def test_demo_configs_differ_only_in_positional_encoding():
    """configs/demo/base.yaml: 'The demo configs differ only in model.positional'."""
    demo = [p for p in sorted((CONFIG_DIR / "demo").glob("*.yaml")) if p.name != "base.yaml"]
    assert len(demo) >= 2
    dicts = []
    for p in demo:
        d = to_dict(load_config(p))
        d.pop("name")
        d["model"].pop("positional")
        dicts.append(d)
    for p, d in zip(demo[1:], dicts[1:]):
        assert d == dicts[0], f"{p.name} differs from {demo[0].name} outside model.positional"


def test_override_sets_nested_value_over_file(tmp_path: Path):
    path = base_config_path(tmp_path)
    cfg = load_config(path, ["model.positional.name=learnable", "model.num_heads=8", "training.schedule.warmup=400"])
    assert cfg.model.positional.name == "learnable"
    assert cfg.model.num_heads == 8 and cfg.model.d_model == 32  # file value kept where not overridden
    assert cfg.training.schedule.warmup == 400


def test_override_values_are_typed_as_yaml(tmp_path: Path):
    path = base_config_path(tmp_path)
    cfg = load_config(
        path,
        [
            "model.norm_first=true",
            "training.max_tokens=null",
            "training.lr=0.001",
            "training.clip_grad_norm=1",
            "name=my run",
            "training.betas=[0.9, 0.997]",
        ],
    )
    assert cfg.model.norm_first is True
    assert cfg.training.max_tokens is None
    assert cfg.training.lr == 0.001 and isinstance(cfg.training.lr, float)
    assert cfg.training.clip_grad_norm == 1.0 and isinstance(cfg.training.clip_grad_norm, float)
    assert cfg.name == "my run"
    assert cfg.training.betas == (0.9, 0.997)


def test_override_switches_from_token_to_sentence_batches():
    cfg = load_config(CONFIG_DIR / "demo" / "base.yaml", ["training.batch_size=32", "training.max_tokens=null"])
    assert (cfg.training.batch_size, cfg.training.max_tokens) == (32, None)


def test_override_scientific_notation_is_a_float(tmp_path: Path):
    """`--set training.lr=1e-3` is the natural way to write a learning rate.

    PyYAML follows YAML 1.1, which reads `1e-3` (no dot) as the *string* '1e-3', so the config
    loader must still accept it as the float 0.001 (as it would be in YAML 1.2 / JSON / Python).
    """
    path = base_config_path(tmp_path)
    cfg = load_config(path, ["training.lr=1e-3"])
    assert cfg.training.lr == pytest.approx(1e-3) and isinstance(cfg.training.lr, float)
    cfg = load_config(path, ["training.eps=1e-9", "training.weight_decay=1E-2"])
    assert cfg.training.eps == pytest.approx(1e-9) and cfg.training.weight_decay == pytest.approx(1e-2)


def test_malformed_override_raises(tmp_path: Path):
    path = base_config_path(tmp_path)
    with pytest.raises(ConfigError, match="key.sub=value"):
        load_config(path, ["model.positional.name"])
    with pytest.raises(ConfigError, match="model.d_model"):
        load_config(path, ["model.d_model.x=3"])  # d_model is a value, not a section


def error_message(path: Path, overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_unknown_nested_key_names_key_lists_valid_keys_and_suggests(tmp_path: Path):
    msg = error_message(base_config_path(tmp_path), ["model.positional.nmae=rope"])
    assert "model.positional.nmae" in msg
    assert "Did you mean 'name'" in msg and "Options of 'sinusoidal': randomized, max_position." in msg
    msg = error_message(base_config_path(tmp_path), ["model.positional.name=none", "model.positional.nmae=x"])
    assert "'none' takes no options" in msg


def test_unknown_top_level_key(tmp_path: Path):
    msg = error_message(base_config_path(tmp_path), ["traning.lr=0.1"])
    assert "'traning'" in msg and "Did you mean 'training'" in msg
    for field in dataclasses.fields(ExperimentConfig):
        assert field.name in msg


def test_unknown_key_in_file(tmp_path: Path):
    path = write(tmp_path / "bad.yaml", "model: {d_model: 32, num_heads: 4, num_layers: 2}\n")
    msg = str(pytest.raises(ConfigError, load_config, path).value)
    assert "model.num_layers" in msg and "num_encoder_layers" in msg


def test_bad_literal_lists_valid_choices(tmp_path: Path):
    msg = error_message(base_config_path(tmp_path), ["training.optimizer=sgd"])
    assert "training.optimizer" in msg and "'sgd'" in msg
    assert "adam" in msg and "adamw" in msg


def test_unknown_positional_encoding_lists_registry(tmp_path: Path):
    msg = error_message(base_config_path(tmp_path), ["model.positional.name=foo"])
    assert "model.positional.name" in msg and "'foo'" in msg
    for name in POSITIONAL_ENCODINGS:
        assert name in msg


def test_an_option_of_another_encoding_is_refused_naming_both(tmp_path: Path):
    """Each encoding declares its options: `clip_distance` under rope used to be accepted and ignored."""
    msg = error_message(base_config_path(tmp_path), ["model.positional.name=rope", "model.positional.clip_distance=8"])
    assert "'model.positional.clip_distance' is not an option of the 'rope' encoding" in msg
    assert "(it is one of: shaw)" in msg and "theta, fraction, layout, cross_attention" in msg
    msg = error_message(base_config_path(tmp_path), ["model.positional.name=shaw", "model.positional.clip_distanse=8"])
    assert "Did you mean 'clip_distance'" in msg
    cfg = load_config(base_config_path(tmp_path), ["model.positional.name=shaw", "model.positional.clip_distance=8"])
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
    msg = error_message(base_config_path(tmp_path), overrides)
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
    path = write(
        tmp_path / "config.yaml", yaml.safe_dump({"model": {"d_model": 32, "num_heads": 4, "positional": old}})
    )
    import utils.config

    utils.config._legacy_noted = False
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
    """The worked example of docs/DESIGN.md: an encoding registered with an Options dataclass and a
    check_options is configurable, checked and built with no change to the config code."""
    from dataclasses import dataclass

    from models.positional_encodings import POSITIONAL_ENCODINGS as registry
    from models.positional_encodings import SinusoidalPositionalEncoding, register, sinusoidal_table

    @dataclass
    class ScaledOptions:
        scale: float = 1.0

    @register("scaled_sinusoidal")
    class ScaledSinusoidal(SinusoidalPositionalEncoding):
        Options = ScaledOptions

        def __init__(self, d_model, num_heads, causal, scale=1.0):
            super().__init__(d_model, num_heads, causal)
            self.scale = scale

        @classmethod
        def check_options(cls, options, *, head_dim, max_len):
            if options.scale <= 0:
                raise ValueError(f"model.positional.scale must be positive, got {options.scale}")

        def add_to_embeddings(self, x, positions):
            return x + self.scale * sinusoidal_table(positions, self.d_model).to(x.dtype)

    try:
        path = base_config_path(tmp_path)
        cfg = load_config(path, ["model.positional.name=scaled_sinusoidal", "model.positional.scale=0.5"])
        model = build_model(cfg.model, V, V, 0)
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
        assert "model.positional.scale must be positive" in error_message(
            path, ["model.positional.name=scaled_sinusoidal", "model.positional.scale=-1"]
        )
        assert "not an option of the 'scaled_sinusoidal'" in error_message(
            path, ["model.positional.name=scaled_sinusoidal", "model.positional.theta=2"]
        )
    finally:
        del registry["scaled_sinusoidal"]


def test_wrong_type_names_the_key(tmp_path: Path):
    path = base_config_path(tmp_path)
    msg = error_message(path, ["training.epochs=abc"])
    assert "training.epochs" in msg and "integer" in msg
    msg = error_message(path, ["model.norm_first=maybe"])
    assert "model.norm_first" in msg
    msg = error_message(path, ["training.epochs=2.5"])
    assert "training.epochs" in msg
    msg = error_message(path, ["training.betas=[0.9]"])
    assert "training.betas" in msg


def test_d_model_must_be_divisible_by_heads(tmp_path: Path):
    msg = error_message(base_config_path(tmp_path), ["model.d_model=100", "model.num_heads=8"])
    assert "model.d_model" in msg and "model.num_heads" in msg and "divisible" in msg


def test_exactly_one_of_batch_size_and_max_tokens(tmp_path: Path):
    path = base_config_path(tmp_path)  # defaults: batch_size 56, max_tokens null
    both = error_message(path, ["training.max_tokens=2000"])
    neither = error_message(path, ["training.batch_size=null"])
    for msg in (both, neither):
        assert "training.batch_size" in msg and "training.max_tokens" in msg


def test_dump_then_load_round_trips(tmp_path: Path):
    cfg = load_config(
        base_config_path(tmp_path),
        [
            "model.positional.name=rope",
            "training.max_tokens=1500",
            "training.batch_size=null",
            "training.clip_grad_norm=0.5",
            "run_dir=/tmp/somewhere",
            "training.betas=[0.8, 0.9]",
        ],
    )
    out = tmp_path / "resolved.yaml"
    dump_config(cfg, out)
    again = load_config(out)
    assert again == cfg
    assert again.training.betas == (0.8, 0.9)
    assert again.run_dir == "/tmp/somewhere" and again.training.max_tokens == 1500
    # The dumped file is fully resolved: no `base:` reference to follow.
    assert "base" not in yaml.safe_load(out.read_text(encoding="utf-8"))


def test_every_checkpoint_metric_has_a_direction():
    """The metrics a config may name and the directions training and compare.py use are one list."""
    import typing

    from utils.config_schema import METRIC_SIGN, TrainingConfig

    allowed = typing.get_args(typing.get_type_hints(TrainingConfig)["checkpoint_metric"])
    assert set(allowed) == set(METRIC_SIGN) and all(sign in (1.0, -1.0) for sign in METRIC_SIGN.values())
