"""The experiment config's schema: one pydantic dataclass per section, with defaults, bounds and a
comment per key.

`settings/config.py` reads YAML into these (pydantic checks every key and value); the rest of the harness
reads the dataclasses. A new key is added here, with its default and what it does;
`make config-schema` writes configs/schema.json from it for editors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field
from pydantic.dataclasses import dataclass

from settings.positional import PositionalConfig
from settings.types import STRICT
from utils.metrics import VALIDATION_METRICS

# ----------------------------------------------------------------------------- key roles
# Every key declares once, here, what may change it after a run has started (its role). What a
# resume may change, what test.py/inference.py may override, which keys tell configurations apart
# in compare.py, the TensorBoard HParams columns and inference.py's flags are all derived from it.
EXPERIMENT = "experiment"  # defines the experiment (model, data, tokenizer, recipe): fixed once a run starts
SEED = "seed"  # fixed once a run starts; runs that differ only in it are seeds of one configuration
IDENTITY = "identity"  # names and places the run (name, run_dir); not part of the configuration
TRAINING = "training"  # steers training from now on (lr, max_steps, validation): a resume may change it
# how and where it runs and what test.py reports (device, threads, disk, batch budgets, evaluation.*'s
# breakdowns), not what the configuration is: any time
RUNTIME = "runtime"
INFERENCE = "inference"  # how a trained model is decoded: on resume and at test/inference time

# role -> (a resume may change it, test.py/inference.py --set may change it, it tells configurations apart)
ROLES = {
    EXPERIMENT: (False, False, True),
    SEED: (False, False, False),
    IDENTITY: (True, True, False),
    TRAINING: (True, False, True),
    RUNTIME: (True, True, False),
    INFERENCE: (True, True, True),
}


def setting(
    default: Any = ...,
    *,
    role: Optional[str] = None,
    factory: Any = None,
    low: Optional[float] = None,
    above: Optional[float] = None,
    high: Optional[float] = None,
    below: Optional[float] = None,
    zero: Optional[str] = None,
    null: Optional[str] = None,
    hparam: bool = False,
    flags: tuple[str, ...] = (),
    help: Optional[str] = None,
) -> Any:
    """A config key with its role (inherited from its section when None), its bounds (at least `low`,
    above `above`, at most `high`, below `below`; a list's bounds go on its element type), whether it
    is a TensorBoard HParams column, and the command-line flags inference.py offers for it (with
    their help). `zero` and `null` say what 0 and null do for a key that accepts them (e.g. "no
    images"): a value that switches something off is documented where the key is declared. The
    role, flags and texts travel as the field's `json_schema_extra` (configs/schema.json shows them)."""
    if role is not None and role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    extra = {"role": role, "hparam": hparam, "flags": list(flags), "zero": zero, "null": null}
    extra = {k: v for k, v in extra.items() if v}
    default = {"default_factory": factory} if factory is not None else {"default": default}
    return Field(**default, ge=low, gt=above, le=high, lt=below, description=help, json_schema_extra=extra)


def key_info(field: Any) -> dict:
    """What `setting` declared for a schema field: role, hparam, flags, help, zero and null."""
    return {**(field.json_schema_extra or {}), "help": field.description}


# Largest sizes a key may take: far beyond any model this harness trains (the base model is 512 wide),
# small enough that a typo (an extra zero or two) is refused before anything is allocated.
MAX_WIDTH = 65_536
MAX_LAYERS = 256
MAX_VOCAB = 1_000_000
MAX_LENGTH = 1_000_000  # tokens of one sentence
MAX_SEED = 2**32 - 1  # numpy's seeds are 32-bit
# The model's float32 weights plus Adam's state and gradients (16 bytes a parameter) must stay below
# this: 1e10 parameters are 160 GB, more than the largest single accelerator (141 GB) or the hosts
# this runs on hold. A fixed cap, not this machine's memory, so that a config is valid or not
# everywhere (compare.py reads runs trained elsewhere); see config_checks.check_model_size.
MAX_PARAMETERS = 10_000_000_000
Length = Annotated[int, Field(ge=0, le=MAX_LENGTH)]  # an element of a list of lengths (bucket edges)
Decay = Annotated[float, Field(ge=0.0, lt=1.0)]  # Adam's beta1, beta2


@dataclass(config=STRICT)
class TrainConcatConfig:
    """Training on joined pairs (Varis & Bojar 2021): with probability `prob` a training example
    joins k ~ U{2..max_k} random training pairs (both sides within `data.max_len`). Which pairs
    are joined is drawn once per run from `seed`, so epochs have a fixed length and resume is exact."""

    prob: float = setting(0.0, role=EXPERIMENT, low=0.0, high=1.0, zero="single pairs only", hparam=True)
    max_k: int = setting(2, role=EXPERIMENT, low=2, high=1024)


@dataclass(config=STRICT)
class DataConfig:
    """Where the parallel corpus comes from and how it is split and filtered."""

    source: Literal["tatoeba", "iwslt2017", "parallel_text"] = setting("tatoeba", hparam=True)
    # tatoeba: path of the manythings.org TSV (English<TAB>French[<TAB>attribution]), may be .gz
    path: str = setting("data/corpora/tatoeba-fr-en/fra-eng.tsv.gz")
    src_lang: str = setting("fr")
    tgt_lang: str = setting("en")
    # tatoeba: sizes of the held-out splits, drawn by a seeded shuffle (the file is sorted by length)
    # of source-sentence groups: all translations of one French sentence land in the same split
    valid_size: int = setting(2000, low=1, high=MAX_LENGTH * 100)
    test_size: int = setting(2000, low=1, high=MAX_LENGTH * 100)
    split_seed: int = setting(1, low=0, high=MAX_SEED, zero="a seed like any other")
    # Drop training pairs whose source (up to case, punctuation, spacing) is a valid or test source.
    # For official splits that are never re-split (iwslt2017, parallel_text); a no-op on tatoeba.
    drop_train_overlap: bool = setting(False)
    # parallel_text: one entry per split. A dict with `src` and `tgt` (line-aligned files,
    # raw WIT3 `train.tags.*` or `IWSLT17.TED.*.xml` files are recognised) or a `tsv` path.
    train: Optional[dict] = setting(None)
    valid: Optional[dict] = setting(None)
    test: Optional[dict] = setting(None)
    # iwslt2017: Hugging Face dataset id, config and revision (the parquet conversion)
    hf_name: str = setting("IWSLT/iwslt2017")
    hf_config: str = setting("iwslt2017-fr-en")
    hf_revision: str = setting("refs/convert/parquet")
    # Caps on the *training* pairs: how many are kept (seeded sample), and their length in subword
    # tokens (BOS/EOS excluded); longer or empty training pairs are dropped and counted. Valid and
    # test sets are never filtered: every pair is scored (see evaluation/test_set.py).
    max_train_pairs: Optional[int] = setting(None, low=1, null="every training pair")
    max_len: int = setting(256, low=1, high=MAX_LENGTH)
    # Only for training pairs: drop pairs whose source has more than this many tokens
    # (length-generalisation experiments); valid/test keep every pair.
    train_max_src_len: Optional[int] = setting(None, low=1, high=MAX_LENGTH, null="no cap", hparam=True)
    cache_dir: str = setting("data/cache", role=RUNTIME)
    # Joined training pairs (a remedy for long inputs); prob 0 (default) trains on single pairs.
    train_concat: TrainConcatConfig = setting(factory=TrainConcatConfig)


@dataclass(config=STRICT)
class TokenizerConfig:
    """Subword tokenizer: a joint BPE trained on the training split, or a pretrained one."""

    type: Literal["bpe", "pretrained"] = setting("bpe", hparam=True)
    vocab_size: int = setting(8000, low=16, high=MAX_VOCAB, hparam=True)
    min_frequency: int = setting(2, low=0, high=MAX_LENGTH, zero="as 1: every pair of symbols may merge")
    # pretrained: a Hugging Face name or local directory (e.g. Helsinki-NLP/opus-mt-fr-en)
    name: Optional[str] = setting(None)


@dataclass(config=STRICT)
class ModelConfig:
    """Encoder-decoder Transformer. Defaults are the report's base model."""

    d_model: int = setting(512, low=1, high=MAX_WIDTH, hparam=True)
    num_heads: int = setting(8, low=1, high=MAX_WIDTH, hparam=True)
    num_encoder_layers: int = setting(6, low=1, high=MAX_LAYERS, hparam=True)
    num_decoder_layers: int = setting(6, low=1, high=MAX_LAYERS, hparam=True)
    ffn_dim: int = setting(2048, low=1, high=4 * MAX_WIDTH, hparam=True)
    dropout: float = setting(0.1, low=0.0, below=1.0, zero="no dropout")
    attention_dropout: float = setting(0.0, low=0.0, below=1.0, zero="no dropout")
    activation: Literal["relu", "gelu"] = setting("relu")
    norm_first: bool = setting(False, hparam=True)  # pre-norm (True) or post-norm as in the paper (False)
    # Share source/target embeddings (needs a joint vocabulary) and tie the output projection.
    share_embeddings: bool = setting(True)
    tie_output: bool = setting(True)
    positional: PositionalConfig = setting(factory=PositionalConfig)


@dataclass(config=STRICT)
class ScheduleConfig:
    """Learning-rate factor applied to `optimizer.lr`, evaluated every step.

    warmup_exponential: factor = (t+1)/(warmup+1) for t < warmup, 1.0 for `hold` more units,
      then exp(-decay * (t - warmup - hold)). With unit=epoch, warmup=6, hold=1, decay=0.35
      this is exactly the report's epoch-based schedule.
    inverse_sqrt: factor = min((t+1)/warmup, sqrt(warmup/(t+1))) (Vaswani et al. with lr as peak).
    constant: factor = 1.
    """

    name: Literal["warmup_exponential", "inverse_sqrt", "constant"] = setting("warmup_exponential", hparam=True)
    unit: Literal["step", "epoch"] = setting("epoch")
    warmup: int = setting(6, low=0, high=MAX_LENGTH * 100, zero="no warmup")
    hold: int = setting(1, low=0, high=MAX_LENGTH * 100, zero="no hold")
    decay: float = setting(0.35, low=0.0, high=100.0, zero="no decay")
    min_factor: float = setting(0.0, low=0.0, high=1.0, zero="no floor")


CHECKPOINT_METRICS = Literal[tuple(m.name for m in VALIDATION_METRICS)]  # the registry's (utils/metrics.py)


@dataclass(config=STRICT)
class TrainingConfig:
    """Optimisation, batching, validation and checkpointing."""

    epochs: int = setting(20, role=TRAINING, low=1, high=MAX_LENGTH, hparam=True)
    # stop after this many updates (overrides epochs when reached)
    max_steps: Optional[int] = setting(None, role=TRAINING, low=1, null="no limit: `epochs` ends it", hparam=True)
    batch_size: Optional[int] = setting(
        56, low=1, null="use max_tokens", hparam=True
    )  # sentences per batch; or use max_tokens
    # token budget per batch (target+source max), length-bucketed
    max_tokens: Optional[int] = setting(None, low=1, null="use batch_size", hparam=True)
    optimizer: Literal["adam", "adamw"] = setting("adam")
    # no upper bound: a rate too high diverges, and training says so (exit 3)
    lr: float = setting(3e-4, role=TRAINING, above=0.0, hparam=True)
    betas: tuple[Decay, Decay] = setting((0.9, 0.98), zero="no averaging")
    eps: float = setting(1e-8, above=0.0, high=1.0)
    weight_decay: float = setting(0.0, low=0.0, high=10.0, zero="no weight decay")
    label_smoothing: float = setting(0.0, low=0.0, below=1.0, zero="no smoothing", hparam=True)
    clip_grad_norm: Optional[float] = setting(
        None, role=TRAINING, above=0.0, null="no clipping"
    )  # applied after unscaling (fp16)
    # autocast dtype (bf16 also runs on CPU)
    precision: Literal["fp32", "bf16", "fp16"] = setting("fp32", hparam=True)
    update_freq: int = setting(
        1, low=1, high=MAX_LENGTH, hparam=True
    )  # gradient accumulation: batches per optimizer update
    compile: bool = setting(False, role=RUNTIME)  # torch.compile the model and its loss for training
    # With compile, on one GPU, update_freq 1: replay the model's forward and backward (loss
    # included) as CUDA graphs (one recording per batch shape; use with pad_to_multiple 8 or 16).
    # No effect on a CPU.
    cuda_graphs: bool = setting(False, role=RUNTIME)
    # Batch lengths rounded up to a multiple of this (padding, masked); with max_tokens the budget
    # counts the padded tokens (smaller batches): few batch shapes for compilation and CUDA graphs
    pad_to_multiple: int = setting(1, low=1, high=1024)
    # Pack several pairs per row of this many tokens (each side), attending within each pair, its
    # positions its own (data/packing.py, models/packing.py): batches of one shape [rows, length],
    # rows = batch_size, or max_tokens // length; at least data.max_len + 1
    pack_length: Optional[int] = setting(None, low=2, high=MAX_LENGTH + 1, null="one pair per row")
    schedule: ScheduleConfig = setting(factory=ScheduleConfig)
    # Validation: loss/perplexity/accuracy every `validate_every_steps` (or every epoch if None),
    # greedy sacreBLEU on `bleu_sentences` validation pairs every `bleu_every` validations.
    validate_every_steps: Optional[int] = setting(None, role=TRAINING, low=1, null="every epoch")
    bleu_every: int = setting(1, role=TRAINING, low=1)
    # Validation BLEU's greedy search: its output length limit a * source length + b and its autocast
    # dtype. Training keys of their own (not decoding.*, a test-time choice), so that how a trained
    # model is decoded later never changes which checkpoint training kept by valid_bleu.
    bleu_max_len_a: float = setting(1.5, role=TRAINING, low=0.0, high=1000.0, zero="bleu_max_len_b alone")
    bleu_max_len_b: int = setting(10, role=TRAINING, low=0, high=MAX_LENGTH, zero="bleu_max_len_a alone")
    bleu_precision: Literal["fp32", "bf16", "fp16"] = setting("fp32", role=TRAINING)
    bleu_sentences: Optional[int] = setting(
        500, role=TRAINING, low=0, zero="no validation BLEU", null="every validation pair"
    )
    # Checkpoints: the best `keep_best` by `checkpoint_metric`, plus the last one.
    checkpoint_metric: CHECKPOINT_METRICS = setting(VALIDATION_METRICS[0].name)
    keep_best: int = setting(1, role=RUNTIME, low=1)
    # newest checkpoints kept (resume falls back to an older one; averaging)
    keep_last: int = setting(2, role=RUNTIME, low=1)
    early_stopping_patience: Optional[int] = setting(None, role=TRAINING, low=1, null="no early stopping")
    device: Literal["auto", "cpu", "cuda", "mps"] = setting("auto", role=RUNTIME)
    num_threads: Optional[int] = setting(
        None, role=RUNTIME, low=1, high=4096, null="torch's default"
    )  # torch CPU threads
    num_workers: int = setting(0, role=RUNTIME, low=0, high=1024, zero="batches built in the training process")
    log_every: int = setting(50, role=RUNTIME, low=1)
    num_sample_translations: int = setting(3, role=RUNTIME, low=0, zero="no samples")
    # TensorBoard images (attention maps of a fixed validation sentence, learned positional tables)
    # every this many validations and at the end; 0: none
    tensorboard_images_every: int = setting(5, role=RUNTIME, low=0, zero="no images")


@dataclass(config=STRICT)
class DecodingConfig:
    """Search used by test.py and inference.py (validation BLEU has its own: training.bleu_*)."""

    strategy: Literal["greedy", "beam"] = setting("beam", flags=("--strategy",), help="search")
    beam_size: int = setting(5, low=1, high=1024, flags=("--beam_size", "--beam"), help="beam width")
    length_penalty: Literal["none", "avg", "wu"] = setting(
        "wu",
        flags=("--length_penalty",),
        help="length normalisation: none, avg (per token), wu (GNMT, exponent --lenpen)",
    )
    alpha: float = setting(
        0.6,
        low=0.0,
        high=10.0,
        zero="as length_penalty none",
        flags=("--lenpen", "--alpha"),  # exponent of the `wu` (GNMT) length penalty
        help="length-penalty exponent: alpha of the wu penalty ((5 + len) / 6) ** alpha (--alpha: OpenNMT's name)",
    )
    # max output length = a * src_len + b
    max_len_a: float = setting(
        1.5,
        low=0.0,
        high=1000.0,
        zero="max_len_b alone",
        flags=("--max_len_a",),
        help="output length limit a * source length + b: a",
    )
    max_len_b: int = setting(
        10,
        low=0,
        high=MAX_LENGTH,
        zero="max_len_a alone",
        flags=("--max_len_b",),
        help="output length limit a * source length + b: b",
    )
    # N best hypotheses per input (beam search; inference.py prints them with their scores)
    nbest: int = setting(
        1, low=1, high=1024, flags=("--nbest",), help="print the N best translations with their scores (beam search)"
    )
    # token budget per decoding batch (source tokens x beam)
    # (a batch budget: how the search is batched, not what it finds)
    max_tokens: int = setting(
        4000,
        role=RUNTIME,
        low=1,
        flags=("--max_tokens",),
        help="token budget of a decoding batch (source tokens x beam)",
    )
    min_len: int = setting(
        0, low=0, high=MAX_LENGTH, zero="off", flags=("--min_len",), help="no end of sentence before this many tokens"
    )
    no_repeat_ngram: int = setting(
        0,
        low=0,
        high=1024,
        zero="off",
        flags=("--no_repeat_ngram",),
        help="never repeat an n-gram of this size (0: off)",
    )
    # Autocast dtype of the search: bf16/fp16 on GPUs (bf16 also on CPU, where fp32 is usually faster)
    precision: Literal["fp32", "bf16", "fp16"] = setting(
        "fp32",
        flags=("--precision",),
        help="autocast dtype: bf16/fp16 on GPUs, bf16 on CPU (fp32 is usually faster there)",
    )
    # The pytorch backend's step at fixed shapes, on a CUDA device captured as a CUDA graph per
    # batch layout and replayed (decoding/fixed_shape.py); elsewhere the same step runs eagerly
    cuda_graphs: bool = setting(False, role=RUNTIME)
    # What runs the search: this harness's PyTorch decoder, or CTranslate2 on a converted copy of the
    # model (export.py --format ctranslate2; for a run, converted into <run>/ctranslate2/ on first use)
    backend: Literal["pytorch", "ctranslate2"] = setting(
        "pytorch", flags=("--backend",), help="pytorch, or ctranslate2 (a converted copy: docs/CTRANSLATE2.md)"
    )
    # CTranslate2's weight/compute type (int8: quantized on load); null: as decoding.precision
    compute_type: Optional[
        Literal["float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16"]
    ] = setting(
        None,
        null="as decoding.precision (fp32: float32)",
        flags=("--compute_type",),
        help="CTranslate2 compute type (int8, int8_float32, float32, ...; default: as --precision)",
    )


@dataclass(config=STRICT)
class EvaluationConfig:
    """How test.py breaks scores down."""

    # Edges of source-length buckets in subword tokens: [e0, e1), [e1, e2), ..., [e_last, inf).
    length_buckets: list[Length] = setting(factory=lambda: [1, 10, 15, 20, 30, 40], zero="an edge like any other")
    # Length extrapolation: also score inputs made of k consecutive test pairs joined, for each k
    # listed (e.g. [1, 2, 4, 8]); consecutive within a document when the reader knows documents
    # (WIT3 XML), else in an order shuffled with `concat_seed` (k = 1 is the test set in its own
    # order). test.py --concat overrides.
    concat: list[Annotated[int, Field(ge=1, le=1024)]] = setting(factory=list)
    concat_seed: int = setting(1, low=0, high=MAX_SEED, zero="a seed like any other")
    # Teacher-forced diagnostic (evaluation/teacher_forced.py): the references' NLL and accuracy per
    # target position, for k = 1 and every k above, independent of when the model stops.
    teacher_forced: bool = setting(True)
    # Its target-position buckets (decoder positions, 0 = BOS): [b0, b1), ..., [b_last, inf); b0 = 0.
    position_buckets: list[Length] = setting(
        factory=lambda: [0, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512], zero="the first edge (BOS)"
    )


@dataclass(config=STRICT)
class ExperimentConfig:
    """One experiment: everything needed to reproduce a run."""

    name: str = setting("experiment", role=IDENTITY, hparam=True)
    run_dir: Optional[str] = setting(None, role=IDENTITY)  # default: runs/<name>
    seed: int = setting(1234, role=SEED, low=0, high=MAX_SEED, zero="a seed like any other", hparam=True)
    # A section's role is the role of each of its keys that does not declare its own.
    data: DataConfig = setting(factory=DataConfig, role=EXPERIMENT)
    tokenizer: TokenizerConfig = setting(factory=TokenizerConfig, role=EXPERIMENT)
    model: ModelConfig = setting(factory=ModelConfig, role=EXPERIMENT)
    training: TrainingConfig = setting(factory=TrainingConfig, role=EXPERIMENT)
    decoding: DecodingConfig = setting(factory=DecodingConfig, role=INFERENCE)
    # what is measured and how scores are broken down, not what the configuration is: a run scored
    # with other buckets is still the same configuration (and test.py may change it)
    evaluation: EvaluationConfig = setting(factory=EvaluationConfig, role=RUNTIME)

    @property
    def resolved_run_dir(self) -> Path:
        return Path(self.run_dir) if self.run_dir else Path("runs") / self.name
