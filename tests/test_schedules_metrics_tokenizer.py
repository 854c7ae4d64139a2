"""LR schedules (training/schedules.py), translation metrics (evaluation/metrics.py), BPE tokenizer (tokenizer/)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch

from tokenizer import (BPETokenizer, load_or_train_tokenizer, tokenizer_from_state_dict)
from utils.config import ScheduleConfig, TokenizerConfig
from evaluation.metrics import NLTK_TOKENIZATION, nltk_corpus_bleu4, score_translations
from training.schedules import build_scheduler, inverse_sqrt, schedule_factor, warmup_exponential


# ----------------------------------------------------------------------------- schedules


def report_schedule(epoch: int) -> float:
    """The report's epoch-based factor, written out from DESIGN.md."""
    if epoch <= 5:
        return (epoch + 1) / 7
    if epoch == 6:
        return 1.0
    return math.exp(-0.35 * (epoch - 7))


def test_warmup_exponential_is_the_report_schedule():
    for e in range(6):
        assert warmup_exponential(e, 6, 1, 0.35) == pytest.approx((e + 1) / 7)
    assert warmup_exponential(6, 6, 1, 0.35) == 1.0
    assert warmup_exponential(7, 6, 1, 0.35) == 1.0
    for e in range(8, 25):
        assert warmup_exponential(e, 6, 1, 0.35) == pytest.approx(math.exp(-0.35 * (e - 7)))
    for e in range(25):
        assert warmup_exponential(e, 6, 1, 0.35) == pytest.approx(report_schedule(e))


def test_schedule_factor_epoch_unit_is_constant_within_an_epoch():
    cfg = ScheduleConfig(name="warmup_exponential", unit="epoch", warmup=6, hold=1, decay=0.35)
    steps_per_epoch = 5
    factor = schedule_factor(cfg, steps_per_epoch)
    for step in range(20 * steps_per_epoch):
        assert factor(step) == pytest.approx(report_schedule(step // steps_per_epoch))
    for epoch in range(20):
        values = {factor(epoch * steps_per_epoch + k) for k in range(steps_per_epoch)}
        assert len(values) == 1


def test_schedule_factor_step_unit_and_floor():
    cfg = ScheduleConfig(name="warmup_exponential", unit="step", warmup=6, hold=1, decay=0.35, min_factor=0.1)
    factor = schedule_factor(cfg, steps_per_epoch=1000)  # ignored for unit=step
    assert factor(0) == pytest.approx(1 / 7) and factor(6) == 1.0
    assert factor(8) == pytest.approx(math.exp(-0.35))
    assert factor(1000) == pytest.approx(0.1)  # never below min_factor
    constant = schedule_factor(ScheduleConfig(name="constant"), 10)
    assert [constant(s) for s in (0, 7, 10_000)] == [1.0, 1.0, 1.0]


def test_inverse_sqrt_peaks_at_one_then_decays():
    warmup = 400
    values = [inverse_sqrt(t, warmup) for t in range(4000)]
    assert max(values) == pytest.approx(1.0)
    assert values.index(max(values)) == warmup - 1
    for t in range(warmup - 1):
        assert values[t] == pytest.approx((t + 1) / warmup)
    for t in range(warmup - 1, 4000, 37):
        assert values[t] == pytest.approx(math.sqrt(warmup / (t + 1)))
    # Vaswani et al.: proportional to d^-0.5 * min(step^-0.5, step * warmup^-1.5), normalised to peak 1.
    for step in (1, 100, 400, 1600, 3999):
        vaswani = min(step ** -0.5, step * warmup ** -1.5) / warmup ** -0.5
        assert inverse_sqrt(step - 1, warmup) == pytest.approx(vaswani)


@pytest.mark.parametrize("cfg", [
    ScheduleConfig(name="warmup_exponential", unit="epoch", warmup=6, hold=1, decay=0.35),
    ScheduleConfig(name="inverse_sqrt", unit="step", warmup=4),
])
def test_build_scheduler_sets_lr_to_base_times_factor(cfg):
    base_lr, steps_per_epoch = 3e-4, 3
    param = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.Adam([param], lr=base_lr, betas=(0.9, 0.98), eps=1e-8)
    scheduler = build_scheduler(optimizer, cfg, steps_per_epoch)
    factor = schedule_factor(cfg, steps_per_epoch)
    for k in range(40):
        # After k updates, the (k+1)-th update runs at base * factor(k).
        assert optimizer.param_groups[0]["lr"] == pytest.approx(base_lr * factor(k))
        param.grad = torch.ones(2)
        optimizer.step()
        scheduler.step()
    # The state survives a checkpoint round trip.
    fresh = build_scheduler(torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=base_lr), cfg, steps_per_epoch)
    fresh.load_state_dict(scheduler.state_dict())
    assert fresh.get_last_lr()[0] == pytest.approx(base_lr * factor(40))


# ----------------------------------------------------------------------------- metrics


def test_identical_translations_score_perfectly():
    refs = ["The cat is on the mat.", "I don't know what you're talking about!", "Where is the hotel?"]
    scores = score_translations(list(refs), refs)
    assert scores.sacrebleu == 100.0
    assert scores.nltk_bleu4 == 1.0
    assert scores.chrf == 100.0
    assert scores.num_sentences == 3


def test_sacrebleu_signature_and_value_match_the_library():
    import sacrebleu

    hyps = ["The cat sat on a mat.", "He doesn't like it at all."]
    refs = ["The cat is on the mat.", "He does not like it at all."]
    scores = score_translations(hyps, refs)
    sig = scores.sacrebleu_signature
    # sacreBLEU 2.x format: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x"
    assert "tok:13a" in sig and "case:mixed" in sig and "nrefs:1" in sig and "version:" in sig
    assert "chrF" in scores.chrf_signature or "nc:6" in scores.chrf_signature
    assert scores.sacrebleu == pytest.approx(round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2))
    assert scores.chrf == pytest.approx(round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2))
    assert "Treebank" in scores.nltk_tokenization and scores.nltk_tokenization == NLTK_TOKENIZATION
    assert set(scores.as_dict()) >= {"sacrebleu", "sacrebleu_signature", "nltk_bleu4", "chrf"}


def test_nltk_bleu4_is_on_word_tokens_not_characters():
    """The original report's mistake: raw strings make nltk score character 4-grams."""
    from nltk.tokenize import TreebankWordTokenizer
    from nltk.translate.bleu_score import corpus_bleu

    # Many characters shared, few word 4-grams shared.
    hyps = ["He is walking to the station now.", "The children were playing in the gardens.",
            "She's reading the newspaper."]
    refs = ["He was walking to the stations now.", "The children are playing in the garden.",
            "She's reading the newspaper."]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        char_level = corpus_bleu([[r] for r in refs], hyps)  # what the report computed
        tok = TreebankWordTokenizer()
        independent = corpus_bleu([[tok.tokenize(r)] for r in refs], [tok.tokenize(h) for h in hyps],
                                  weights=(0.25, 0.25, 0.25, 0.25))
    reported = score_translations(hyps, refs).nltk_bleu4
    assert reported == pytest.approx(independent, abs=1e-4)
    assert nltk_corpus_bleu4(hyps, refs) == pytest.approx(independent)
    assert char_level - reported > 0.3, (char_level, reported)
    assert 0.0 < reported < 0.6


def test_nltk_bleu4_tokenizes_punctuation():
    """Treebank splits "mat." into "mat" "." and "don't" into "do" "n't"."""
    assert nltk_corpus_bleu4(["I don't know the mat."], ["I don't know the mat."]) == 1.0
    # One changed word: word-level BLEU drops a lot, far more than on characters.
    score = nltk_corpus_bleu4(["I do not know the mat ."], ["I don't know the mat."])
    assert 0.0 < score < 1.0


def test_metrics_edge_cases():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        score_translations(["a", "b"], ["a"])
    assert nltk_corpus_bleu4(["", ""], ["a b c d", "e f g h"]) == 0.0
    scores = score_translations(["", ""], ["a b c d", "e f g h"])
    assert scores.sacrebleu == 0.0 and scores.nltk_bleu4 == 0.0


# ----------------------------------------------------------------------------- tokenizer


def training_sentences() -> list[str]:
    subjects_fr = ["Je", "Tu", "Il", "Elle", "Nous", "Vous", "L'hôtel", "Le garçon", "La fille", "Où"]
    objects_fr = ["l'école", "le marché", "la forêt", "l'hôtel", "le café", "la gare", "l'île", "le théâtre",
                  "la côte", "le château"]
    subjects_en = ["I", "You", "He", "She", "We", "They", "The hotel", "The boy", "The girl", "Where"]
    objects_en = ["school", "the market", "the forest", "the hotel", "the coffee shop", "the station",
                  "the island", "the theatre", "the coast", "the castle"]
    sentences = []
    for i in range(10):
        for j in range(10):
            k = (i * 10 + j) % 4
            end_fr = [" ?", " !", ".", " ?"][k]
            end_en = ["?", "!", ".", "?"][k]
            sentences.append(f"{subjects_fr[i]} va à {objects_fr[j]}{end_fr} Ça coûte {i + j} €.")
            sentences.append(f"{subjects_en[i]} goes to {objects_en[j]}{end_en} It costs {i + j} euros: it's true.")
    sentences += ["Où est la gare ? Il coûte 20 €.", "Qu'est-ce que c'est ? Voilà, très bien !",
                  "Garçon, l'addition s'il vous plaît.", "Noël, été, pêche, naïf, maïs, cœur, où, dû."]
    return sentences


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.train(training_sentences(), vocab_size=300, min_frequency=2)


def test_bpe_special_ids(bpe):
    assert (bpe.pad_id, bpe.unk_id, bpe.bos_id, bpe.eos_id) == (0, 1, 2, 3)
    assert bpe.tokens([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert bpe.src_vocab_size == bpe.tgt_vocab_size <= 300


@pytest.mark.parametrize("text", [
    "Où est l'hôtel ? Il coûte 20 €.",
    "L'été, la fille va à l'île !",
    "It's true: the boy goes to the castle.",
])
def test_bpe_round_trips_french_and_english(bpe, text):
    ids = bpe.encode_src(text)
    assert ids and bpe.unk_id not in ids
    assert not {bpe.pad_id, bpe.bos_id, bpe.eos_id} & set(ids)  # no specials added
    assert bpe.decode(ids) == text
    assert bpe.encode_tgt(text) == ids  # joint vocabulary
    # Special ids are skipped when decoding.
    assert bpe.decode([bpe.bos_id, *ids, bpe.eos_id, bpe.pad_id]) == text


def test_bpe_compresses_frequent_words(bpe):
    assert len(bpe.encode_src("le château")) < len("le château")


def test_bpe_state_dict_round_trip(bpe):
    restored = tokenizer_from_state_dict(bpe.state_dict())
    texts = training_sentences()[:20] + ["Où est l'hôtel ? Il coûte 20 €."]
    assert restored.encode_src_batch(texts) == bpe.encode_src_batch(texts)
    assert restored.fingerprint == bpe.fingerprint
    assert (restored.pad_id, restored.bos_id, restored.eos_id) == (bpe.pad_id, bpe.bos_id, bpe.eos_id)
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        tokenizer_from_state_dict({"kind": "sentencepiece"})


def test_bpe_fingerprint_changes_with_vocabulary(bpe):
    smaller = BPETokenizer.train(training_sentences(), vocab_size=200, min_frequency=2)
    assert smaller.fingerprint != bpe.fingerprint
    assert bpe.fingerprint == tokenizer_from_state_dict(bpe.state_dict()).fingerprint


def test_load_or_train_tokenizer_saves_and_reuses(tmp_path: Path):
    sents = training_sentences()
    pairs = list(zip(sents[0::2], sents[1::2]))
    cfg = TokenizerConfig(type="bpe", vocab_size=300, min_frequency=2)
    run_dir = tmp_path / "run"
    logs: list[str] = []
    first = load_or_train_tokenizer(cfg, pairs, run_dir, log=logs.append)
    saved = run_dir / "tokenizer.json"
    assert saved.is_file()
    assert any("training" in line for line in logs)
    logs.clear()
    second = load_or_train_tokenizer(cfg, None, run_dir, log=logs.append)  # pairs not needed now
    assert any("reusing" in line for line in logs)
    assert second.fingerprint == first.fingerprint
    text = "Où est l'hôtel ? Il coûte 20 €."
    assert second.encode_src(text) == first.encode_src(text)
    with pytest.raises(ValueError, match="empty"):
        load_or_train_tokenizer(cfg, None, tmp_path / "other_run", log=logs.append)
