"""Cross-key checks of a loaded config: what the schema's types alone cannot express (ranges,
exactly-one-of pairs, keys that need one another, the positional encoding's own options).
`utils.config.load_config` runs them on every config it returns."""

from __future__ import annotations

import dataclasses

from utils.config_schema import ExperimentConfig
from utils.encoding_registry import registered_encodings
from utils.errors import ConfigError


def validate(cfg: ExperimentConfig) -> None:
    """Cross-field checks that types alone cannot express, section by section."""
    check_model(cfg)
    check_training(cfg.training)
    check_data(cfg)
    check_evaluation(cfg)
    check_decoding(cfg)


def check_model(cfg: ExperimentConfig) -> None:
    """Sizes, dropout, and the positional encoding's own options (its defaults filled in)."""
    POSITIONAL_ENCODINGS = registered_encodings()
    m = cfg.model
    pe = m.positional.name
    if pe not in POSITIONAL_ENCODINGS:
        raise ConfigError(
            f"invalid value {pe!r} for config key 'model.positional.name'. "
            f"Valid choices: {', '.join(sorted(POSITIONAL_ENCODINGS))}"
        )
    for key in ("d_model", "num_heads", "ffn_dim", "num_encoder_layers", "num_decoder_layers"):
        if getattr(m, key) < 1:
            raise ConfigError(f"model.{key} must be at least 1, got {getattr(m, key)}")
    if m.d_model % m.num_heads:
        raise ConfigError(f"model.d_model ({m.d_model}) must be divisible by model.num_heads ({m.num_heads})")
    encoding = POSITIONAL_ENCODINGS[pe]
    # A config without a `positional` section gets the encoding's defaults, as a written one does.
    m.positional.options = {**dataclasses.asdict(encoding.Options()), **m.positional.options}
    try:
        # training.pad_to_multiple rounds a batch's length (the longest input plus BOS) up
        multiple = max(1, cfg.training.pad_to_multiple)
        longest = -(-(cfg.data.max_len + 1) // multiple) * multiple - 1
        encoding.check_options(
            encoding.Options(**m.positional.options), head_dim=m.d_model // m.num_heads, max_len=longest
        )
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{e} (model.positional.name: {pe})") from None
    for key in ("dropout", "attention_dropout"):
        if not 0.0 <= getattr(m, key) < 1.0:
            raise ConfigError(f"model.{key} must be in [0, 1)")


def check_training(t) -> None:
    if (t.batch_size is None) == (t.max_tokens is None):
        raise ConfigError(
            "set exactly one of training.batch_size (sentences) and training.max_tokens "
            "(token budget); set the other to null"
        )
    for key in (
        "max_steps",
        "epochs",
        "batch_size",
        "max_tokens",
        "validate_every_steps",
        "bleu_every",
        "log_every",
        "keep_best",
        "keep_last",
    ):
        value = getattr(t, key)
        if value is not None and value < 1:
            raise ConfigError(
                f"training.{key} must be at least 1, got {value}"
                + (" (or null)" if key in ("max_steps", "batch_size", "max_tokens", "validate_every_steps") else "")
            )
    if t.tensorboard_images_every < 0:
        raise ConfigError(
            f"training.tensorboard_images_every must be >= 0 (0: no images), got {t.tensorboard_images_every}"
        )
    if t.update_freq < 1:
        raise ConfigError("training.update_freq must be at least 1")
    if t.pad_to_multiple < 1:
        raise ConfigError(f"training.pad_to_multiple must be at least 1 (1: no rounding), got {t.pad_to_multiple}")
    if t.cuda_graphs and not t.compile:
        raise ConfigError(
            "training.cuda_graphs replays the compiled step: set training.compile: true too "
            "(and training.pad_to_multiple: 8 or 16, so that a run has few batch shapes)"
        )
    if t.cuda_graphs and t.update_freq > 1:
        raise ConfigError(
            "training.cuda_graphs keeps each batch's gradients in graph memory until the next "
            "forward: set training.update_freq: 1 with it (or training.cuda_graphs: false)"
        )
    if not 0.0 <= t.label_smoothing < 1.0:
        raise ConfigError("training.label_smoothing must be in [0, 1)")
    if t.lr <= 0:
        raise ConfigError("training.lr must be positive")


def check_data(cfg: ExperimentConfig) -> None:
    if cfg.tokenizer.type == "pretrained" and not cfg.tokenizer.name:
        raise ConfigError("tokenizer.type=pretrained needs tokenizer.name (e.g. Helsinki-NLP/opus-mt-fr-en)")
    d = cfg.data
    for key in ("valid_size", "test_size"):  # a split of no pairs cannot validate or be scored
        if d.source == "tatoeba" and getattr(d, key) < 1:
            raise ConfigError(f"data.{key} must be at least 1 (pairs held out for that split), got {getattr(d, key)}")
    for key in ("max_train_pairs", "max_len", "train_max_src_len"):
        value = getattr(d, key, None)
        if value is not None and value < 1:
            raise ConfigError(f"data.{key} must be at least 1 (or null for no limit), got {value}")
    if d.source == "parallel_text":
        for split in ("train", "valid", "test"):
            spec = getattr(d, split)
            if spec is None:
                raise ConfigError(
                    f"data.source=parallel_text needs data.{split}: {{src: path, tgt: path}} or {{tsv: path}}"
                )
            if not ({"src", "tgt"} <= set(spec) or "tsv" in spec):
                raise ConfigError(f"data.{split} must have keys src and tgt, or tsv; got {sorted(spec)}")
    tc = d.train_concat
    if not 0.0 <= tc.prob <= 1.0:
        raise ConfigError(f"data.train_concat.prob must be in [0, 1], got {tc.prob}")
    if tc.max_k < 2:
        raise ConfigError(f"data.train_concat.max_k must be at least 2 (pairs joined), got {tc.max_k}")


def check_evaluation(cfg: ExperimentConfig) -> None:
    if any(k < 1 for k in cfg.evaluation.concat):
        raise ConfigError(f"evaluation.concat lists pairs per input (k >= 1), got {cfg.evaluation.concat}")
    edges = cfg.evaluation.length_buckets
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ConfigError(f"evaluation.length_buckets must be increasing bucket edges, got {edges}")


def check_decoding(cfg: ExperimentConfig) -> None:
    if cfg.decoding.nbest > 1 and cfg.decoding.strategy == "greedy":
        raise ConfigError(
            f"decoding.nbest={cfg.decoding.nbest} needs beam search, but decoding.strategy is "
            f"greedy (one hypothesis): drop nbest or use strategy beam (--strategy beam)"
        )
    if cfg.decoding.beam_size < 1 or cfg.decoding.nbest < 1 or cfg.decoding.nbest > cfg.decoding.beam_size:
        raise ConfigError("decoding needs beam_size >= 1 and 1 <= nbest <= beam_size")
    for key in ("max_tokens", "max_len_a", "max_len_b", "min_len", "no_repeat_ngram", "alpha"):
        value, least = getattr(cfg.decoding, key), 1 if key == "max_tokens" else 0
        if value < least:
            raise ConfigError(f"decoding.{key} must be at least {least}, got {value}")
