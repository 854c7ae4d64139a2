"""The metrics, each declared once: the test metrics (`METRICS`: translation metrics from the
standard libraries, computed the same way for every run) and the validation metrics training
logs and keeps checkpoints by (`VALIDATION_METRICS`). test.py's scores.json and summary, its
TensorBoard scalars, the model card, the per-bucket scores (`score_subset`), the config's
`training.checkpoint_metric` and compare.py's tables read the registry, so a new metric is one
entry here.

- sacreBLEU (Post 2018): cased, on detokenized text, 13a tokenization; its signature is reported.
- chrF (Popović 2015) through sacreBLEU.
- nltk corpus BLEU-4 on *word tokens*: hypotheses and references are tokenized with nltk's
  Treebank word tokenizer (rule-based, no download), cased, uniform 4-gram weights, no
  smoothing; reported in [0, 1]. It is never computed on raw strings (which nltk would
  score as characters, the original report's mistake).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

NLTK_TOKENIZATION = "nltk TreebankWordTokenizer, cased"


@dataclass(frozen=True)
class Metric:
    """One metric: its name, which way is better, how it is computed and how it is shown."""

    name: str  # its key in scores.json (a concat row, a bucket) or metrics.jsonl's valid events, compare's rows
    label: str  # its name in the test summary, the model card and compare's tables ("test <label>")
    digits: int  # decimals shown
    direction: int  # +1: higher is better; -1: lower is (a checkpoint's score is direction x value)
    # hypotheses, references -> {name: value, about: ...}; None: the validation evaluator's own
    # (training/engine.py: loss and token accuracy over the validation set, BLEU through `score_translations`)
    compute: Optional[Callable[[list[str], list[str]], dict]] = None
    about: Optional[str] = None  # the key of what says how it was computed (a signature), quoted by the card
    by_subset: bool = False  # also scored on parts of a test set (length buckets, beyond training: score_subset)


def sacrebleu_scores(hypotheses: list[str], references: list[str]) -> dict:
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    return {
        "sacrebleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
        "sacrebleu_signature": str(bleu.get_signature()),
    }


def chrf_scores(hypotheses: list[str], references: list[str]) -> dict:
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    return {
        "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
        "chrf_signature": str(chrf.get_signature()),
    }


def nltk_scores(hypotheses: list[str], references: list[str]) -> dict:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns when a higher-order n-gram has no match
        value = nltk_corpus_bleu4(hypotheses, references)
    return {"nltk_bleu4": round(value, 4), "nltk_tokenization": NLTK_TOKENIZATION}


METRICS: list[Metric] = [  # a test set's; the first is the headline (bold on the model card)
    Metric("sacrebleu", "sacreBLEU", 2, +1, sacrebleu_scores, "sacrebleu_signature", by_subset=True),
    Metric("chrf", "chrF", 2, +1, chrf_scores, "chrf_signature", by_subset=True),
    Metric("nltk_bleu4", "nltk BLEU-4", 4, +1, nltk_scores, "nltk_tokenization"),
]
HEADLINE = METRICS[0].name  # the metric a study's comparisons and plots are in

VALIDATION_METRICS: list[Metric] = [  # training.checkpoint_metric's choices, the first its default
    Metric("valid_loss", "valid loss", 4, -1),
    Metric("valid_bleu", "valid BLEU", 2, +1),
    Metric("valid_accuracy", "valid accuracy", 4, +1),
]
# Checkpoint scores (and the scores in best_*.pt file names) are sign x value, so "best" is the highest
METRIC_SIGN = {m.name: float(m.direction) for m in VALIDATION_METRICS}


def metric_line(scores: dict) -> str:
    """Every registered metric of `scores` (a scores.json or a concat row), as the test summary prints them."""
    return "  ".join(f"{m.label} {scores[m.name]:.{m.digits}f}" for m in METRICS)


def metric_digits() -> dict[str, int]:
    """{name: decimals shown} of every registered metric."""
    return {m.name: m.digits for m in METRICS}


def nltk_corpus_bleu4(hypotheses: list[str], references: list[str]) -> float:
    """Corpus BLEU-4 over Treebank word tokens (one reference per sentence)."""
    from nltk.tokenize import TreebankWordTokenizer
    from nltk.translate.bleu_score import corpus_bleu

    tok = TreebankWordTokenizer()
    hyps = [tok.tokenize(h) for h in hypotheses]
    refs = [[tok.tokenize(r)] for r in references]
    if not any(hyps):
        return 0.0
    return float(corpus_bleu(refs, hyps, weights=(0.25, 0.25, 0.25, 0.25)))


def score_translations(hypotheses: list[str], references: list[str]) -> dict:
    """Every registered metric of detokenized hypotheses against one reference each (with what says
    how it was computed), the sentence count, and sacreBLEU's hypothesis and reference lengths
    (13a tokens) with their ratio: a model that stops early on long inputs loses BLEU through the
    brevity penalty, which is not translating badly."""
    from sacrebleu.metrics import BLEU

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    scores: dict = {}
    for metric in METRICS:
        scores.update(metric.compute(hypotheses, references))
    lengths = BLEU().corpus_score(hypotheses, [references])
    return {
        **scores,
        "num_sentences": len(hypotheses),
        "hyp_len": lengths.sys_len,
        "ref_len": lengths.ref_len,
        "length_ratio": round(lengths.sys_len / max(1, lengths.ref_len), 4),
    }


def bucket_label(lo: int, hi: int | None) -> str:
    return f"{lo}-{hi - 1}" if hi is not None else f"{lo}+"


def score_by_length(hypotheses: list[str], references: list[str], lengths: list[int], edges: list[int]) -> list[dict]:
    """sacreBLEU and chrF per source-length bucket [e_i, e_i+1) (the last bucket is open-ended)."""
    rows = []
    for lo, hi in zip(edges, [*edges[1:], None]):
        keep = [n >= lo and (hi is None or n < hi) for n in lengths]
        rows.append(
            {
                "bucket": bucket_label(lo, hi),
                "min_len": lo,
                "max_len": None if hi is None else hi - 1,
                **score_subset(hypotheses, references, keep),
            }
        )
    return rows


def score_subset(hypotheses: list[str], references: list[str], keep: list[bool]) -> dict:
    """The metrics scored on parts of a test set (`by_subset`: sacreBLEU, chrF) and the length ratio
    over the sentences where `keep` is true (a length bucket, or the sentences longer than any
    training source)."""
    from sacrebleu.metrics import BLEU

    hyps = [h for h, k in zip(hypotheses, keep) if k]
    refs = [r for r, k in zip(references, keep) if k]
    subset = [m for m in METRICS if m.by_subset]
    if not hyps:
        return {"num_sentences": 0, **{m.name: None for m in subset}, "length_ratio": None}
    lengths = BLEU().corpus_score(hyps, [refs])
    return {
        "num_sentences": len(hyps),
        **{m.name: m.compute(hyps, refs)[m.name] for m in subset},
        "length_ratio": round(lengths.sys_len / max(1, lengths.ref_len), 4),
    }


def pool_nll(parts, field: str = "nll_no_eos", count: str = "tokens_no_eos") -> Optional[float]:
    """Token-weighted NLL (EOS renormalised out; `field`/`count` nll/tokens: plain) over summaries or
    buckets of a teacher-forced report, evaluation/teacher_forced.py (None ones and empty ones left
    out), e.g. an entry's buckets, or one summary of every k."""
    parts = [p for p in parts if p and p.get(field) is not None and p.get(count)]
    tokens = sum(p[count] for p in parts)
    return sum(p[field] * p[count] for p in parts) / tokens if tokens else None
