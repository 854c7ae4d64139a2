"""Config loading and validation (settings/config.py) and that every shipped config builds a model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import config_error, small_config

from models.build import build_model
from models.positional_encodings import POSITIONAL_ENCODINGS
from settings.config import ConfigError, ExperimentConfig, dump_config, load_config, to_dict

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


def test_configs_are_found():
    assert ALL_CONFIGS, f"no YAML files found under {CONFIG_DIR}"
    assert any(p.parent.name == "demo" for p in ALL_CONFIGS)
    assert any(p.parent.name == "iwslt2017" for p in ALL_CONFIGS)


@pytest.mark.slow
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
    path = small_config(tmp_path)
    cfg = load_config(path, ["model.positional.name=learnable", "model.num_heads=8", "training.schedule.warmup=400"])
    assert cfg.model.positional.name == "learnable"
    assert cfg.model.num_heads == 8 and cfg.model.d_model == 32  # file value kept where not overridden
    assert cfg.training.schedule.warmup == 400


def test_override_values_are_typed_as_yaml(tmp_path: Path):
    path = small_config(tmp_path)
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
    path = small_config(tmp_path)
    cfg = load_config(path, ["training.lr=1e-3"])
    assert cfg.training.lr == pytest.approx(1e-3) and isinstance(cfg.training.lr, float)
    cfg = load_config(path, ["training.eps=1e-9", "training.weight_decay=1E-2"])
    assert cfg.training.eps == pytest.approx(1e-9) and cfg.training.weight_decay == pytest.approx(1e-2)


def test_malformed_override_raises(tmp_path: Path):
    path = small_config(tmp_path)
    with pytest.raises(ConfigError, match="key.sub=value"):
        load_config(path, ["model.positional.name"])
    with pytest.raises(ConfigError, match="model.d_model"):
        load_config(path, ["model.d_model.x=3"])  # d_model is a value, not a section


def test_d_model_must_be_divisible_by_heads(tmp_path: Path):
    msg = config_error(small_config(tmp_path), ["model.d_model=100", "model.num_heads=8"])
    assert "model.d_model" in msg and "model.num_heads" in msg and "divisible" in msg


def test_exactly_one_of_batch_size_and_max_tokens(tmp_path: Path):
    path = small_config(tmp_path)  # defaults: batch_size 56, max_tokens null
    both = config_error(path, ["training.max_tokens=2000"])
    neither = config_error(path, ["training.batch_size=null"])
    for msg in (both, neither):
        assert "training.batch_size" in msg and "training.max_tokens" in msg


def test_dump_then_load_round_trips(tmp_path: Path):
    cfg = load_config(
        small_config(tmp_path),
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

    from settings.schema import TrainingConfig
    from utils.metrics import METRIC_SIGN

    allowed = typing.get_args(typing.get_type_hints(TrainingConfig)["checkpoint_metric"])
    assert set(allowed) == set(METRIC_SIGN) and all(sign in (1.0, -1.0) for sign in METRIC_SIGN.values())


def test_an_override_is_parsed_once_into_its_key_value_and_text(tmp_path: Path):
    from settings.config import Override, parse_override

    override = parse_override("model.positional={name: rope, theta: 500.0}")
    assert override == Override(("model", "positional"), {"name": "rope", "theta": 500.0}, override.text)
    assert override.key == "model.positional" and parse_override(override) is override
    path = small_config(tmp_path)
    assert load_config(path, [override]) == load_config(path, [override.text])
    assert "--set model.d_model=0:" in config_error(path, [parse_override("model.d_model=0")])


def test_a_section_override_merges_unless_it_names_another_encoding():
    from settings.config import apply_overrides

    raw = {"decoding": {"beam_size": 4, "max_len_a": 1.0}, "model": {"positional": {"name": "rope", "theta": 500.0}}}
    assert apply_overrides(raw, ["decoding={beam_size: 3}"])["decoding"] == {"beam_size": 3, "max_len_a": 1.0}
    assert apply_overrides(raw, ["model.positional={theta: 100.0}"])["model"]["positional"] == {
        "name": "rope",
        "theta": 100.0,
    }
    assert apply_overrides(raw, ["model.positional={name: alibi}"])["model"]["positional"] == {"name": "alibi"}
    assert apply_overrides(raw, ["decoding.beam_size=1", "decoding.beam_size=3"])["decoding"]["beam_size"] == 3
    assert apply_overrides(raw, ["decoding.beam_size=3", "decoding={beam_size: 3}"])["decoding"]["beam_size"] == 3
    with pytest.raises(ConfigError, match=r"give decoding.beam_size two values \(1 and 3\)"):
        apply_overrides(raw, ["decoding.beam_size=1", "decoding={beam_size: 3}"])
