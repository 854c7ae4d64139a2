"""Checks of a config that one key's type and bounds cannot express (pydantic checks those): the
model's size, exactly-one-of pairs, keys that need one another, divisibility, the positional
encoding's own options. `settings.config.load_config` runs them on every config it returns, before
anything is allocated."""

from __future__ import annotations

from models.positional_options import ENCODING_OPTIONS
from settings.schema import MAX_PARAMETERS, ExperimentConfig
from utils.errors import ConfigError


def validate(cfg: ExperimentConfig) -> None:
    """The model's size, then the cross-key checks, section by section."""
    check_model_size(cfg)
    check_model(cfg)
    check_training(cfg.training)
    check_packing(cfg)
    check_data(cfg)
    check_evaluation(cfg)
    check_decoding(cfg)


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
    """Heads that divide the width, and the positional encoding's own options."""
    m = cfg.model
    pe = m.positional.name
    if m.d_model % m.num_heads:
        raise ConfigError(f"model.d_model ({m.d_model}) must be divisible by model.num_heads ({m.num_heads})")
    try:
        # training.pad_to_multiple rounds a batch's length (the longest input plus BOS) up
        multiple = max(1, cfg.training.pad_to_multiple)
        longest = -(-(cfg.data.max_len + 1) // multiple) * multiple - 1
        options = ENCODING_OPTIONS[pe](**m.positional.options)  # PositionalConfig.parse checked the name
        options.check(head_dim=m.d_model // m.num_heads, max_len=longest)
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


def check_packing(cfg: ExperimentConfig) -> None:
    """Packed rows hold every pair (the longest side plus BOS) and have one length already."""
    t, longest = cfg.training, cfg.data.max_len + 1
    if t.pack_length is None:
        return
    if t.pack_length < longest:
        raise ConfigError(
            f"training.pack_length ({t.pack_length}) must hold the longest pair, data.max_len + 1 "
            f"({longest}, with BOS): set pack_length to at least {longest}"
        )
    if t.pad_to_multiple > 1:
        raise ConfigError(
            "training.pack_length makes every batch one shape already: set training.pad_to_multiple: 1 with it"
        )
    if t.max_tokens is not None and t.pack_length > t.max_tokens:  # one row alone would pass the budget
        raise ConfigError(
            f"training.pack_length ({t.pack_length}) is more than training.max_tokens ({t.max_tokens}): a packed "
            f"batch is max_tokens // pack_length rows of pack_length tokens, so every batch would be one row "
            f"of {t.pack_length / t.max_tokens:.1f}x the token budget; set pack_length to at most max_tokens"
        )
    if t.cuda_graphs:  # the pairs per batch, and the positions drawn for them, still vary in shape
        raise ConfigError(
            "training.cuda_graphs would record a graph for almost every packed batch (their pair counts "
            "differ): set training.cuda_graphs: false with training.pack_length (training.compile works)"
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
