"""The checks across keys that load_config runs (settings/checks.py): each inconsistent pair of
keys is one line naming both and what works; numeric bounds are reported all at once; a model too
large for any machine here is refused before anything is allocated."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings.config import ConfigError, load_config

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo" / "rope.yaml"


@pytest.mark.parametrize(
    "sets, says",
    [
        (["model.d_model=130", "model.num_heads=4"], "model.d_model (130) must be divisible by model.num_heads (4)"),
        (["model.d_model=36", "model.num_heads=4"], "rope needs an even head dimension"),
        (["training.batch_size=32"], "set exactly one of training.batch_size (sentences) and training.max_tokens"),
        (["training.cuda_graphs=true"], "training.cuda_graphs replays the compiled step: set training.compile: true"),
        (["training.checkpoint_metric=valid_bleu", "training.bleu_sentences=0"], "needs validation BLEU"),
        (["training.pack_length=100"], "training.pack_length (100) must hold the longest pair, data.max_len + 1 (129"),
        (["training.pack_length=256", "training.pad_to_multiple=8"], "set training.pad_to_multiple: 1 with it"),
        (  # issue 67: one 4,096-token row per batch against a budget of 300 tokens
            ["training.max_tokens=300", "training.pack_length=4096"],
            "training.pack_length (4096) is more than training.max_tokens (300)",
        ),
        (
            ["training.pack_length=256", "training.compile=true", "training.cuda_graphs=true"],
            "set training.cuda_graphs: false with training.pack_length",
        ),
        (["tokenizer.type=pretrained"], "tokenizer.type=pretrained needs tokenizer.name"),
        (["evaluation.length_buckets=[1,10,5]"], "evaluation.length_buckets must be increasing bucket edges"),
        (["decoding.strategy=greedy", "decoding.nbest=2"], "decoding.nbest=2 needs beam search"),
        (["decoding.beam_size=2", "decoding.nbest=3"], "decoding.nbest (3) must be at most decoding.beam_size (2)"),
    ],
)
def test_inconsistent_keys_are_one_line_naming_them(sets: list[str], says: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(DEMO, sets)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_model_too_large_for_any_machine_is_refused_before_allocation() -> None:
    with pytest.raises(ConfigError, match=r"billion parameters .* lower model.d_model \(65536\)"):
        load_config(DEMO, ["model.d_model=65536", "model.num_heads=8", "model.ffn_dim=262144"])
