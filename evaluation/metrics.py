"""Translation metrics from the standard libraries, computed the same way for every run.

- sacreBLEU (Post 2018): cased, on detokenized text, 13a tokenization; its signature is reported.
- chrF (Popović 2015) through sacreBLEU.
- nltk corpus BLEU-4 on *word tokens*: hypotheses and references are tokenized with nltk's
  Treebank word tokenizer (rule-based, no download), cased, uniform 4-gram weights, no
  smoothing; reported in [0, 1]. It is never computed on raw strings (which nltk would
  score as characters, the original report's mistake).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

NLTK_TOKENIZATION = "nltk TreebankWordTokenizer, cased"


@dataclass
class TranslationScores:
    sacrebleu: float
    sacrebleu_signature: str
    chrf: float
    chrf_signature: str
    nltk_bleu4: float
    nltk_tokenization: str
    num_sentences: int
    # sacreBLEU's hypothesis and reference lengths (13a tokens) and their ratio: a model that stops
    # early on long inputs loses BLEU through the brevity penalty, which is not translating badly.
    hyp_len: int
    ref_len: int
    length_ratio: float

    def as_dict(self) -> dict:
        return asdict(self)


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


def score_translations(hypotheses: list[str], references: list[str]) -> TranslationScores:
    """sacreBLEU, chrF and nltk BLEU-4 of detokenized hypotheses against one reference each."""
    import warnings

    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns when a higher-order n-gram has no match
        nltk_score = nltk_corpus_bleu4(hypotheses, references)
    return TranslationScores(
        sacrebleu=round(bleu_score.score, 2),
        sacrebleu_signature=str(bleu.get_signature()),
        chrf=round(chrf_score.score, 2),
        chrf_signature=str(chrf.get_signature()),
        nltk_bleu4=round(nltk_score, 4),
        nltk_tokenization=NLTK_TOKENIZATION,
        num_sentences=len(hypotheses),
        hyp_len=bleu_score.sys_len,
        ref_len=bleu_score.ref_len,
        length_ratio=round(bleu_score.sys_len / max(1, bleu_score.ref_len), 4),
    )


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
