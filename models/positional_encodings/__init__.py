"""Positional encodings, selected by name (`model.positional.name`) through a registry.

One module per family, so that a reader sees each family's members side by side:

- `additive.py`: added to the token embeddings: none, sinusoidal, learnable, shape, cape;
- `rotary.py`: rotating queries and keys: rope (with inference-time scaling), xpos;
- `score_bias.py`: a bias on the attention scores: alibi, t5_bias, shaw, kerple, fire;
- `randomized.py`: the `randomized` option of sinusoidal, learnable and rope;
- `base.py`: the registry, the base class and its hooks (how the model uses an encoding).
"""

from models.positional_encodings.additive import (
    CapePositionalEncoding,
    LearnablePositionalEncoding,
    NoPositionalEncoding,
    ShapePositionalEncoding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)
from models.positional_encodings.base import (
    POSITIONAL_ENCODINGS,
    AttentionPositions,
    NoOptions,
    PositionalEncoding,
    build_positional_encoding,
    register,
)
from models.positional_encodings.rotary import (
    RotaryPositionalEncoding,
    XposPositionalEncoding,
    apply_rotary,
    rope_inv_freq,
    rope_tables,
    yarn_inv_freq,
)
from models.positional_encodings.score_bias import (
    ALiBiPositionalEncoding,
    FireBias,
    KerpleLogBias,
    ScoreBiasEncoding,
    ShawRelativeBias,
    T5RelativeBias,
    alibi_slopes,
    t5_relative_bucket,
)

__all__ = [
    "POSITIONAL_ENCODINGS",
    "ALiBiPositionalEncoding",
    "AttentionPositions",
    "CapePositionalEncoding",
    "FireBias",
    "KerpleLogBias",
    "LearnablePositionalEncoding",
    "NoOptions",
    "NoPositionalEncoding",
    "PositionalEncoding",
    "RotaryPositionalEncoding",
    "ScoreBiasEncoding",
    "ShapePositionalEncoding",
    "ShawRelativeBias",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "XposPositionalEncoding",
    "alibi_slopes",
    "apply_rotary",
    "build_positional_encoding",
    "register",
    "rope_inv_freq",
    "rope_tables",
    "sinusoidal_table",
    "t5_relative_bucket",
    "yarn_inv_freq",
]
