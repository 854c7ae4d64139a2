"""Checks of a loaded config: every key's declared bounds (`check_bounds`, one generic check over
the schema), the model's size, and what bounds cannot express (exactly-one-of pairs, keys that need
one another, divisibility, the positional encoding's own options).
`utils.config.load_config` runs them on every config it returns, before anything is allocated."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

from utils.config_schema import MAX_PARAMETERS, ExperimentConfig, PositionalConfig
from utils.encoding_registry import registered_encodings
from utils.errors import ConfigError


def validate(cfg: ExperimentConfig) -> None:
    """Every key within its bounds (all violations at once), then the model's size and the
    cross-key checks, section by section."""
    check_bounds(cfg)
    check_model_size(cfg)
    check_model(cfg)
    check_training(cfg.training)
    check_data(cfg)
    check_evaluation(cfg)
    check_decoding(cfg)


# ----------------------------------------------------------------------------- declared bounds


def _numbers(cfg: Any, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field, Any]]:
    """(dotted key, field, value) of every key of a config's sections, the chosen encoding's options
    included (their fields may declare bounds as the schema's do: `setting(low=...)`)."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, PositionalConfig):
            yield f"{prefix}{f.name}.name", f, value.name
            encoding = registered_encodings().get(value.name)
            for option in dataclasses.fields(encoding.Options) if encoding is not None else ():
                given = value.options.get(option.name, option.default)
                yield f"{prefix}{f.name}.{option.name}", option, given
        elif dataclasses.is_dataclass(value):
            yield from _numbers(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f, value


WORDS = {"low": "at least", "above": "above", "high": "at most", "below": "below"}


def broken_bound(value: Any, f: dataclasses.Field) -> Optional[str]:
    """The bound of the key's declared ones that a number breaks, in words ("at least 1"), or None."""
    b = f.metadata.get("bounds") or {}
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    broken = {
        "low": lambda x: value < x,
        "above": lambda x: value <= x,
        "high": lambda x: value > x,
        "below": lambda x: value >= x,
    }
    return next((f"{WORDS[k]} {b[k]:g}" for k, test in broken.items() if k in b and test(b[k])), None)


def bound_violation(key: str, value: Any, f: dataclasses.Field) -> Optional[str]:
    """One line when `value` (a number, or a list/pair of them) is outside the key's declared bounds."""
    items = value if isinstance(value, (list, tuple)) else [value]
    broken = next((text for v in items if (text := broken_bound(v, f))), None)
    if broken is None:
        return None
    each = "each of " if isinstance(value, (list, tuple)) else ""
    null = f" (or null: {f.metadata['null']})" if f.metadata.get("null") else ""
    shown = list(value) if isinstance(value, tuple) else value
    return f"{each}{key} must be {broken}{null}, got {shown!r}"


def check_bounds(cfg: ExperimentConfig) -> None:
    """Every key's value within the bounds its `setting` declares; all violations in one error,
    one line each."""
    lines = [line for key, f, value in _numbers(cfg) if (line := bound_violation(key, value, f))]
    if len(lines) == 1:
        raise ConfigError(lines[0])
    if lines:
        raise ConfigError(f"{len(lines)} config values are out of bounds:\n  " + "\n  ".join(lines))


def estimated_parameters(cfg: ExperimentConfig) -> int:
    """The Transformer's parameter count from its config (embeddings, attention, feed-forward,
    norms, output projection), within a few percent; the positional tables are left out."""
    m, vocab = cfg.model, cfg.tokenizer.vocab_size
    d, ffn = m.d_model, m.ffn_dim
    attention, feed_forward, norm = 4 * d * d + 4 * d, 2 * d * ffn + d + ffn, 2 * d
    encoder = m.num_encoder_layers * (attention + feed_forward + 2 * norm)
    decoder = m.num_decoder_layers * (2 * attention + feed_forward + 3 * norm)
    embeddings = vocab * d * (1 if m.share_embeddings else 2) + (0 if m.tie_output else vocab * d + vocab)
    return encoder + decoder + embeddings


def check_model_size(cfg: ExperimentConfig) -> None:
    """Refuse a model too large to train before anything is allocated (see MAX_PARAMETERS)."""
    n = estimated_parameters(cfg)
    if n > MAX_PARAMETERS:
        m = cfg.model
        raise ConfigError(
            f"the model would have about {n / 1e9:.0f} billion parameters ({16 * n / 1e9:,.0f} GB of float32 "
            f"weights and Adam state), more than the {MAX_PARAMETERS / 1e9:.0f} billion any machine here can "
            f"train: lower model.d_model ({m.d_model}), model.ffn_dim ({m.ffn_dim}), model.num_encoder_layers "
            f"({m.num_encoder_layers}) / model.num_decoder_layers ({m.num_decoder_layers}) or tokenizer.vocab_size "
            f"({cfg.tokenizer.vocab_size})"
        )


# ----------------------------------------------------------------------------- cross-key checks


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


def check_training(t) -> None:
    if (t.batch_size is None) == (t.max_tokens is None):
        raise ConfigError(
            "set exactly one of training.batch_size (sentences) and training.max_tokens "
            "(token budget); set the other to null"
        )
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
    if t.checkpoint_metric == "valid_bleu" and t.bleu_sentences == 0:
        raise ConfigError(
            "training.checkpoint_metric valid_bleu needs validation BLEU, but training.bleu_sentences is 0 "
            "(none): set bleu_sentences (e.g. 500, or null for every validation pair) or another checkpoint_metric"
        )


def check_data(cfg: ExperimentConfig) -> None:
    if cfg.tokenizer.type == "pretrained" and not cfg.tokenizer.name:
        raise ConfigError("tokenizer.type=pretrained needs tokenizer.name (e.g. Helsinki-NLP/opus-mt-fr-en)")
    d = cfg.data
    if d.source == "parallel_text":
        for split in ("train", "valid", "test"):
            spec = getattr(d, split)
            if spec is None:
                raise ConfigError(
                    f"data.source=parallel_text needs data.{split}: {{src: path, tgt: path}} or {{tsv: path}}"
                )
            if not ({"src", "tgt"} <= set(spec) or "tsv" in spec):
                raise ConfigError(f"data.{split} must have keys src and tgt, or tsv; got {sorted(spec)}")


def check_evaluation(cfg: ExperimentConfig) -> None:
    edges = cfg.evaluation.length_buckets
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ConfigError(f"evaluation.length_buckets must be increasing bucket edges, got {edges}")


def check_decoding(cfg: ExperimentConfig) -> None:
    if cfg.decoding.nbest > 1 and cfg.decoding.strategy == "greedy":
        raise ConfigError(
            f"decoding.nbest={cfg.decoding.nbest} needs beam search, but decoding.strategy is "
            f"greedy (one hypothesis): drop nbest or use strategy beam (--strategy beam)"
        )
    if cfg.decoding.nbest > cfg.decoding.beam_size:
        raise ConfigError(
            f"decoding.nbest ({cfg.decoding.nbest}) must be at most decoding.beam_size ({cfg.decoding.beam_size})"
        )
