"""Translation metrics from the standard libraries, computed the same way for every run, each declared
once in `METRICS`: test.py's scores.json and summary, its TensorBoard scalars, the model card and
compare.py's tables read the registry, so a new metric is one entry here.

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
    """One corpus metric of a test set: how it is computed and how it is shown."""

    name: str  # its key in scores.json (and a concat row), compare's rows, TensorBoard's test/<name>
    label: str  # its name in the test summary, the model card and compare's tables ("test <label>")
    digits: int  # decimals shown
    compute: Callable[[list[str], list[str]], dict]  # hypotheses, references -> {name: value, about: ...}
    about: Optional[str] = None  # the key of what says how it was computed (a signature), quoted by the card


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


METRICS: list[Metric] = [  # the first is the headline (bold on the model card)
    Metric("sacrebleu", "sacreBLEU", 2, sacrebleu_scores, "sacrebleu_signature"),
    Metric("chrf", "chrF", 2, chrf_scores, "chrf_signature"),
    Metric("nltk_bleu4", "nltk BLEU-4", 4, nltk_scores, "nltk_tokenization"),
]


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
    """sacreBLEU, chrF and length ratio over the sentences where `keep` is true (a length bucket,
    or the sentences longer than any training source)."""
    from sacrebleu.metrics import BLEU, CHRF

    hyps = [h for h, k in zip(hypotheses, keep) if k]
    refs = [r for r, k in zip(references, keep) if k]
    if not hyps:
        return {"num_sentences": 0, "sacrebleu": None, "chrf": None, "length_ratio": None}
    bleu = BLEU().corpus_score(hyps, [refs])
    return {
        "num_sentences": len(hyps),
        "sacrebleu": round(bleu.score, 2),
        "chrf": round(CHRF().corpus_score(hyps, [refs]).score, 2),
        "length_ratio": round(bleu.sys_len / max(1, bleu.ref_len), 4),
    }
