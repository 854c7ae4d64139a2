"""The model builder: the only place that reads the `model` config section."""

from __future__ import annotations

from models.positional_encodings import build_positional_encoding
from models.transformer import EncoderOutput, Seq2SeqTransformer
from utils.errors import HarnessError


class ModelTooLargeError(HarnessError):
    """The model's weights could not be allocated on this machine."""


def build_model(cfg, src_vocab_size: int, tgt_vocab_size: int, pad_id: int) -> Seq2SeqTransformer:
    """Builder: a `Seq2SeqTransformer` from the `model` config section and the tokenizer's vocabulary."""

    def pe(causal: bool):
        return build_positional_encoding(cfg.positional, cfg.d_model, cfg.num_heads, causal)

    try:
        return _transformer(cfg, src_vocab_size, tgt_vocab_size, pad_id, pe)
    except (MemoryError, RuntimeError) as e:  # torch's CPU allocator raises a RuntimeError
        if not isinstance(e, MemoryError) and "allocate" not in str(e):
            raise
        raise ModelTooLargeError(
            f"the model (model.d_model={cfg.d_model}, model.ffn_dim={cfg.ffn_dim}, "
            f"{cfg.num_encoder_layers}+{cfg.num_decoder_layers} layers, vocabularies {src_vocab_size}/"
            f"{tgt_vocab_size}) does not fit in this machine's memory: use smaller model.* sizes or "
            f"tokenizer.vocab_size"
        ) from None


def _transformer(cfg, src_vocab_size: int, tgt_vocab_size: int, pad_id: int, pe) -> Seq2SeqTransformer:
    return Seq2SeqTransformer(
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        pad_id=pad_id,
        encoder_pe=pe(False),
        decoder_pe=pe(True),
        d_model=cfg.d_model,
        num_heads=cfg.num_heads,
        num_encoder_layers=cfg.num_encoder_layers,
        num_decoder_layers=cfg.num_decoder_layers,
        ffn_dim=cfg.ffn_dim,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation=cfg.activation,
        norm_first=cfg.norm_first,
        share_embeddings=cfg.share_embeddings,
        tie_output=cfg.tie_output,
    )


__all__ = ["EncoderOutput", "ModelTooLargeError", "Seq2SeqTransformer", "build_model"]
