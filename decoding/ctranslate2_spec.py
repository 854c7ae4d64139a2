"""A trained model as a CTranslate2 `TransformerSpec`: which positional encodings map, and how.

CTranslate2 runs a fixed Transformer whose position handling is one of: a table added to the
embeddings, rotary q/k in self-attention, or a T5 bucket bias in self-attention. What maps exactly:

- sinusoidal, learnable, SHAPE, CAPE, none: a position table (`position_encodings`) of
  `position_rows(cfg)` rows holding what this harness adds at inference: the interleaved
  sin/cos table at positions 0, 1, ... (SHAPE: shifted by its inference shift; CAPE: unaugmented),
  the learned table, or zeros. Never CTranslate2's built-in sinusoid: it is another layout
  ([sin | cos], positions from 1), and a missing table would silently bring it in;
- rope: `rotary_dim`, the pairing (`half` = not interleaved), `rotary_base`; linear scaling as
  CTranslate2's linear scaling, ntk as the raised base it is (a static base change);
- t5_bias: the learned bucket table as `relative_attention_bias` in every layer, with its
  maximum distance (the bucket formula is T5's in both);
- shaw (a learned scalar per head and clipped offset): the same bias with a bucket table large
  enough that every clipped offset has buckets of its own (`shaw_bucket_table`).

Refused in one line (`NotConvertible`): ALiBi (CTranslate2 has decoder-only ALiBi), xPos, KERPLE,
FIRE, YaRN scaling, randomized positions, and any positional term in cross-attention.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from utils.errors import HarnessError

MAPPED = ("sinusoidal", "learnable", "shape", "cape", "none", "rope", "t5_bias", "shaw")
TABLE_ENCODINGS = ("sinusoidal", "learnable", "shape", "cape", "none")
CONVERTER_VERSION = 1  # raise when a mapping changes: a run's kept conversion is then made again
POSITION_ROWS = 4096  # positions of a computed table (sinusoidal, SHAPE, CAPE, none): inputs and outputs
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which every model here uses


class NotConvertible(HarnessError):
    """A model CTranslate2 cannot run as it is: one line naming what and what maps."""


def converter_stamp() -> dict:
    """What a conversion depends on besides the model: this mapping's version and CTranslate2's."""
    import ctranslate2

    return {"converter": CONVERTER_VERSION, "ctranslate2": ctranslate2.__version__}


def check_convertible(cfg) -> None:
    """NotConvertible when the model's positional encoding (with its options) has no exact
    CTranslate2 form."""
    pe = cfg.model.positional
    name, options = pe.name, pe.options
    mapped = f"CTranslate2 runs {', '.join(MAPPED)} (without cross-attention terms or randomized positions)"
    why = None
    if name not in MAPPED:
        why = {
            "alibi": "CTranslate2 has ALiBi only in decoder-only models, not in an encoder",
            "xpos": "CTranslate2 has no xPos decay",
            "kerple": "CTranslate2 has no KERPLE bias",
            "fire": "CTranslate2 has no FIRE bias",
        }.get(name, "CTranslate2 has no such position handling")
    elif options.get("cross_attention"):
        why = "CTranslate2 has no positional term in cross-attention (model.positional.cross_attention: true)"
    elif options.get("randomized"):
        why = "randomized positions are a training scheme CTranslate2 does not reproduce"
    elif name == "rope" and options.get("scaling") == "yarn":
        why = "CTranslate2 has no YaRN scaling: export with --set model.positional.scaling=linear (or ntk)"
    if why:
        raise NotConvertible(f"model.positional.name {name} cannot be exported to CTranslate2: {why}; {mapped}")


def position_rows(cfg, model) -> int | None:
    """Rows of the position table a CTranslate2 model of this encoding carries (its longest input
    and output), or None when positions are relative or rotary (no limit)."""
    name = cfg.model.positional.name
    if name not in TABLE_ENCODINGS:
        return None
    return model.encoder_pe.max_positions if name == "learnable" else POSITION_ROWS


def position_table(pe, rows: int) -> np.ndarray:
    """`[rows, d_model]`: what stack encoding `pe` adds to the embeddings at inference positions 0..rows-1."""
    with torch.no_grad():
        x = torch.zeros(1, rows, pe.d_model)
        positions = pe.positions(rows, 1, False, torch.device("cpu"))
        return pe.add_to_embeddings(x, positions)[0].float().numpy()


def shaw_bucket_table(table: torch.Tensor, clip: int, bidirectional: bool) -> tuple[np.ndarray, int]:
    """Shaw's per-offset scalars `[2 clip + 1, heads]` as a T5 bucket table and its maximum distance:
    enough buckets that offsets up to `clip` are exact and every longer one shares the clipped
    value (checked over offsets far beyond the clip)."""
    from models.positional_encodings import t5_relative_bucket

    exact = clip + 1  # T5 keeps num_buckets / 2 (per direction) exact distances
    num_buckets = 4 * exact if bidirectional else 2 * exact
    max_distance = 2 * exact
    relative = torch.arange(-8 * exact - 64, 8 * exact + 65)  # [offsets]
    if not bidirectional:
        relative = relative[relative <= 0]
    buckets = t5_relative_bucket(relative, bidirectional, num_buckets, max_distance)
    rows = relative.clamp(-clip, clip) + clip
    out = np.zeros((num_buckets, table.size(1)), dtype=np.float32)
    for bucket in buckets.unique().tolist():
        used = rows[buckets == bucket].unique()
        if used.numel() != 1:  # cannot happen with the sizes above; a wrong table must not pass silently
            raise NotConvertible(f"shaw: bucket {bucket} mixes clipped offsets {used.tolist()}")
        out[bucket] = _array(table[int(used)])
    return out, max_distance


def build_spec(cfg, model):
    """The CTranslate2 `TransformerSpec` of `model` (a `Seq2SeqTransformer` in eval mode)."""
    from ctranslate2.specs import attention_spec, common_spec, transformer_spec

    check_convertible(cfg)
    m, pe = cfg.model, cfg.model.positional
    stack = dict(
        num_heads=m.num_heads,
        pre_norm=m.norm_first,
        activation=common_spec.Activation.GELU if m.activation == "gelu" else common_spec.Activation.RELU,
        relative_attention_bias=pe.name in ("t5_bias", "shaw"),
    )
    if pe.name == "rope":
        rope = model.encoder_pe  # its base: NTK scaling raised (RotaryPositionalEncoding.base)
        stack.update(rotary_dim=rope.rot_dim, rotary_interleave=rope.layout == "interleaved", rotary_base=rope.base)
        if rope.scaling == "linear":
            stack.update(
                rotary_scaling_type=attention_spec.RotaryScalingType.Linear, rotary_scaling_factor=rope.scaling_factor
            )
    encoder = transformer_spec.TransformerEncoderSpec(m.num_encoder_layers, **stack)
    decoder = transformer_spec.TransformerDecoderSpec(m.num_decoder_layers, **stack)
    if pe.name == "rope" and hasattr(encoder, "position_encodings"):
        del encoder.position_encodings  # rotary only: no table, never the built-in sinusoid
    rows = position_rows(cfg, model)
    if rows is not None:
        encoder.position_encodings.encodings = position_table(model.encoder_pe, rows)
        decoder.position_encodings.encodings = position_table(model.decoder_pe, rows)

    encoder.embeddings[0].weight = _array(model.src_embed.weight)
    decoder.embeddings.weight = _array(model.tgt_embed.weight)
    decoder.projection.weight = _array(model.output_proj.weight)
    if m.norm_first:
        _norm(encoder.layer_norm, model.encoder_norm)
        _norm(decoder.layer_norm, model.decoder_norm)
    for spec, layer in zip(encoder.layer, model.encoder_layers):
        _attention(spec.self_attention, layer.self_attn, layer.norm1)
        _feed_forward(spec.ffn, layer.ffn, layer.norm2)
    for spec, layer in zip(decoder.layer, model.decoder_layers):
        _attention(spec.self_attention, layer.self_attn, layer.norm1)
        _attention(spec.attention, layer.cross_attn, layer.norm2)
        _feed_forward(spec.ffn, layer.ffn, layer.norm3)
    if stack["relative_attention_bias"]:
        _relative_bias(encoder.layer, model.encoder_pe, bidirectional=True)
        _relative_bias(decoder.layer, model.decoder_pe, bidirectional=False)
    return transformer_spec.TransformerSpec(encoder, decoder)


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def _norm(spec, norm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _linear(spec, linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _attention(spec, attention, norm) -> None:
    """Self-attention: linear_0 fused q/k/v (q, k, v blocks of d_model rows, as here), linear_1 out;
    cross-attention: linear_0 q, linear_1 fused k/v, linear_2 out."""
    if attention.cross:
        projections = (attention.q_proj, attention.kv_proj, attention.out_proj)
    else:
        projections = (attention.qkv_proj, attention.out_proj)
    for linear_spec, linear in zip(spec.linear, projections):
        _linear(linear_spec, linear)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec, ffn, norm) -> None:
    _linear(spec.linear_0, ffn.fc1)
    _linear(spec.linear_1, ffn.fc2)
    _norm(spec.layer_norm, norm)


def _relative_bias(layers, pe, bidirectional: bool) -> None:
    """One stack's bias table (shared by its layers here) in every layer's self-attention."""
    if pe.registry_name == "shaw":
        table, max_distance = shaw_bucket_table(pe.bias_table.weight, pe.clip_distance, bidirectional)
    else:
        table, max_distance = _array(pe.bias_table.weight), pe.max_distance
    for layer in layers:
        layer.self_attention.relative_attention_bias = table
        layer.self_attention.relative_attention_max_distance = np.dtype("int32").type(max_distance)


def vocabulary(tokenizer, size: int, side: str) -> list[str]:
    """The token strings of ids 0..size-1 (CTranslate2 speaks tokens): refused when two ids share a
    string, since the round trip through strings would then change ids."""
    tokens = tokenizer.tokens(range(size), side=side)
    if len(set(tokens)) != len(tokens):
        seen: dict[str, int] = {}
        clash = next((seen[t], i) for i, t in enumerate(tokens) if seen.setdefault(t, i) != i)
        raise NotConvertible(
            f"the tokenizer gives ids {clash[0]} and {clash[1]} the same string: CTranslate2 needs one"
        )
    return tokens


def save_model(cfg, tokenizer, model, folder) -> None:
    """Write the CTranslate2 model folder (model.bin, config.json, vocabulary) of `model`, in float32
    (CTranslate2 quantizes on load: `compute_type`)."""
    spec = build_spec(cfg, model)
    source = vocabulary(tokenizer, model.src_embed.num_embeddings, "src")
    target = vocabulary(tokenizer, model.tgt_embed.num_embeddings, "tgt")
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    bos = target[tokenizer.bos_id]
    spec.config.bos_token, spec.config.eos_token = bos, target[tokenizer.eos_id]
    spec.config.unk_token, spec.config.decoder_start_token = target[tokenizer.unk_id], bos
    spec.config.add_source_bos = spec.config.add_source_eos = False  # the sources come as this harness encodes them
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.validate()
    spec.optimize(quantization="float32")
    Path(folder).mkdir(parents=True, exist_ok=True)
    spec.save(str(folder))
