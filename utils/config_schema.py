"""The experiment config's schema: one dataclass per section, with defaults and a comment per key.

`utils/config.py` reads YAML into these (checking every key and value); the rest of the harness
reads the dataclasses. A new key is added here, with its default and what it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional


@dataclass
class TrainConcatConfig:
    """Training on joined pairs (Varis & Bojar 2021): with probability `prob` a training example
    joins k ~ U{2..max_k} random training pairs (both sides within `data.max_len`). Which pairs
    are joined is drawn once per run from `seed`, so epochs have a fixed length and resume is exact."""

    prob: float = 0.0
    max_k: int = 2


@dataclass
class DataConfig:
    """Where the parallel corpus comes from and how it is split and filtered."""

    source: Literal["tatoeba", "iwslt2017", "parallel_text"] = "tatoeba"
    # tatoeba: path of the manythings.org TSV (English<TAB>French[<TAB>attribution]), may be .gz
    path: str = "data/corpora/tatoeba-fr-en/fra-eng.tsv.gz"
    src_lang: str = "fr"
    tgt_lang: str = "en"
    # tatoeba: sizes of the held-out splits, drawn by a seeded shuffle (the file is sorted by length)
    # of source-sentence groups: all translations of one French sentence land in the same split
    valid_size: int = 2000
    test_size: int = 2000
    split_seed: int = 1
    # Drop training pairs whose source (up to case, punctuation, spacing) is a valid or test source.
    # For official splits that are never re-split (iwslt2017, parallel_text); a no-op on tatoeba.
    drop_train_overlap: bool = False
    # parallel_text: one entry per split. A dict with `src` and `tgt` (line-aligned files,
    # raw WIT3 `train.tags.*` or `IWSLT17.TED.*.xml` files are recognised) or a `tsv` path.
    train: Optional[dict] = None
    valid: Optional[dict] = None
    test: Optional[dict] = None
    # iwslt2017: Hugging Face dataset id, config and revision (the parquet conversion)
    hf_name: str = "IWSLT/iwslt2017"
    hf_config: str = "iwslt2017-fr-en"
    hf_revision: str = "refs/convert/parquet"
    # Caps on the *training* pairs: how many are kept (seeded sample), and their length in subword
    # tokens (BOS/EOS excluded); longer or empty training pairs are dropped and counted. Valid and
    # test sets are never filtered: every pair is scored (see evaluation/test_set.py).
    max_train_pairs: Optional[int] = None
    max_len: int = 256
    # Only for training pairs: drop pairs whose source has more than this many tokens
    # (length-generalisation experiments); valid/test keep every pair.
    train_max_src_len: Optional[int] = None
    cache_dir: str = "data/cache"
    # Joined training pairs (a remedy for long inputs); prob 0 (default) trains on single pairs.
    train_concat: TrainConcatConfig = field(default_factory=TrainConcatConfig)


@dataclass
class TokenizerConfig:
    """Subword tokenizer: a joint BPE trained on the training split, or a pretrained one."""

    type: Literal["bpe", "pretrained"] = "bpe"
    vocab_size: int = 8000
    min_frequency: int = 2
    # pretrained: a Hugging Face name or local directory (e.g. Helsinki-NLP/opus-mt-fr-en)
    name: Optional[str] = None


@dataclass
class PositionalConfig:
    """Positional-encoding strategy: `name` picks it from the registry in models/positional_encodings.py;
    `options` holds that encoding's own keys, written flat beside `name` in YAML
    (`positional: {name: rope, theta: 500.0}`). Each encoding declares its options (its `Options`
    dataclass); the loader fills their defaults and refuses a key the chosen encoding does not take."""

    name: str = "sinusoidal"
    options: dict = field(default_factory=dict)


@dataclass
class ModelConfig:
    """Encoder-decoder Transformer. Defaults are the report's base model."""

    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    ffn_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: Literal["relu", "gelu"] = "relu"
    norm_first: bool = False  # pre-norm (True) or post-norm as in the paper (False)
    # Share source/target embeddings (needs a joint vocabulary) and tie the output projection.
    share_embeddings: bool = True
    tie_output: bool = True
    positional: PositionalConfig = field(default_factory=PositionalConfig)


@dataclass
class ScheduleConfig:
    """Learning-rate factor applied to `optimizer.lr`, evaluated every step.

    warmup_exponential: factor = (t+1)/(warmup+1) for t < warmup, 1.0 for `hold` more units,
      then exp(-decay * (t - warmup - hold)). With unit=epoch, warmup=6, hold=1, decay=0.35
      this is exactly the report's epoch-based schedule.
    inverse_sqrt: factor = min((t+1)/warmup, sqrt(warmup/(t+1))) (Vaswani et al. with lr as peak).
    constant: factor = 1.
    """

    name: Literal["warmup_exponential", "inverse_sqrt", "constant"] = "warmup_exponential"
    unit: Literal["step", "epoch"] = "epoch"
    warmup: int = 6
    hold: int = 1
    decay: float = 0.35
    min_factor: float = 0.0


# Direction of each checkpoint metric: +1 when higher is better. Checkpoint scores (and the
# scores in best_*.pt file names) are sign x value, so "best" is always the highest.
METRIC_SIGN = {"valid_loss": -1.0, "valid_bleu": 1.0, "valid_accuracy": 1.0}


@dataclass
class TrainingConfig:
    """Optimisation, batching, validation and checkpointing."""

    epochs: int = 20
    max_steps: Optional[int] = None  # stop after this many updates (overrides epochs when reached)
    batch_size: Optional[int] = 56  # sentences per batch; or use max_tokens
    max_tokens: Optional[int] = None  # token budget per batch (target+source max), length-bucketed
    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.0
    label_smoothing: float = 0.0
    clip_grad_norm: Optional[float] = None  # applied after unscaling (fp16)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"  # autocast dtype (bf16 also runs on CPU)
    update_freq: int = 1  # gradient accumulation: batches per optimizer update
    compile: bool = False  # torch.compile the model for training
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    # Validation: loss/perplexity/accuracy every `validate_every_steps` (or every epoch if None),
    # greedy sacreBLEU on `bleu_sentences` validation pairs every `bleu_every` validations.
    validate_every_steps: Optional[int] = None
    bleu_every: int = 1
    bleu_sentences: Optional[int] = 500
    # Checkpoints: the best `keep_best` by `checkpoint_metric`, plus the last one.
    checkpoint_metric: Literal["valid_loss", "valid_bleu", "valid_accuracy"] = "valid_loss"
    keep_best: int = 1
    keep_last: int = 2  # newest checkpoints kept (resume falls back to an older one; averaging)
    early_stopping_patience: Optional[int] = None
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    num_threads: Optional[int] = None  # torch CPU threads (None: torch default)
    num_workers: int = 0
    log_every: int = 50
    num_sample_translations: int = 3
    # TensorBoard images (attention maps of a fixed validation sentence, learned positional tables)
    # every this many validations and at the end; 0: none
    tensorboard_images_every: int = 5


@dataclass
class DecodingConfig:
    """Search used by validation BLEU, test.py and inference.py."""

    strategy: Literal["greedy", "beam"] = "beam"
    beam_size: int = 5
    length_penalty: Literal["none", "avg", "wu"] = "wu"
    alpha: float = 0.6  # exponent of the `wu` (GNMT) length penalty
    max_len_a: float = 1.5  # max output length = a * src_len + b
    max_len_b: int = 10
    nbest: int = 1
    max_tokens: int = 4000  # token budget per decoding batch (source tokens x beam)
    min_len: int = 0  # no EOS before this many output tokens
    no_repeat_ngram: int = 0  # forbid repeating any n-gram of this size (0: off)
    # Autocast dtype of the search: bf16/fp16 on GPUs (bf16 also on CPU, where fp32 is usually faster)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"


@dataclass
class EvaluationConfig:
    """How test.py breaks scores down."""

    # Edges of source-length buckets in subword tokens: [e0, e1), [e1, e2), ..., [e_last, inf).
    length_buckets: list[int] = field(default_factory=lambda: [1, 10, 15, 20, 30, 40])
    # Length extrapolation: also score inputs made of k consecutive test pairs joined, for each k
    # listed (e.g. [1, 2, 4, 8]); consecutive within a document when the reader knows documents
    # (WIT3 XML), else in an order shuffled with `concat_seed`. test.py --concat overrides.
    concat: list[int] = field(default_factory=list)
    concat_seed: int = 1


@dataclass
class ExperimentConfig:
    """One experiment: everything needed to reproduce a run."""

    name: str = "experiment"
    run_dir: Optional[str] = None  # default: runs/<name>
    seed: int = 1234
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)

    @property
    def resolved_run_dir(self) -> Path:
        return Path(self.run_dir) if self.run_dir else Path("runs") / self.name
