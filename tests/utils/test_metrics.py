"""Translation metrics (utils/metrics.py) against the standard libraries: sacreBLEU with its
signature, chrF, nltk BLEU-4 on word tokens."""

from __future__ import annotations

import warnings

import pytest

from utils.metrics import NLTK_TOKENIZATION, nltk_corpus_bleu4, score_translations


def test_identical_translations_score_perfectly():
    refs = ["The cat is on the mat.", "I don't know what you're talking about!", "Where is the hotel?"]
    scores = score_translations(list(refs), refs)
    assert scores["sacrebleu"] == 100.0
    assert scores["nltk_bleu4"] == 1.0
    assert scores["chrf"] == 100.0
    assert scores["num_sentences"] == 3


def test_sacrebleu_signature_and_value_match_the_library():
    import sacrebleu

    hyps = ["The cat sat on a mat.", "He doesn't like it at all."]
    refs = ["The cat is on the mat.", "He does not like it at all."]
    scores = score_translations(hyps, refs)
    sig = scores["sacrebleu_signature"]
    # sacreBLEU 2.x format: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x"
    assert "tok:13a" in sig and "case:mixed" in sig and "nrefs:1" in sig and "version:" in sig
    assert "chrF" in scores["chrf_signature"] or "nc:6" in scores["chrf_signature"]
    assert scores["sacrebleu"] == pytest.approx(round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2))
    assert scores["chrf"] == pytest.approx(round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2))
    assert "Treebank" in scores["nltk_tokenization"] and scores["nltk_tokenization"] == NLTK_TOKENIZATION
    assert set(scores) >= {"sacrebleu", "sacrebleu_signature", "nltk_bleu4", "chrf"}


def test_nltk_bleu4_is_on_word_tokens_not_characters():
    """The original report's mistake: raw strings make nltk score character 4-grams."""
    from nltk.tokenize import TreebankWordTokenizer
    from nltk.translate.bleu_score import corpus_bleu

    # Many characters shared, few word 4-grams shared.
    hyps = [
        "He is walking to the station now.",
        "The children were playing in the gardens.",
        "She's reading the newspaper.",
    ]
    refs = [
        "He was walking to the stations now.",
        "The children are playing in the garden.",
        "She's reading the newspaper.",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        char_level = corpus_bleu([[r] for r in refs], hyps)  # what the report computed
        tok = TreebankWordTokenizer()
        independent = corpus_bleu(
            [[tok.tokenize(r)] for r in refs], [tok.tokenize(h) for h in hyps], weights=(0.25, 0.25, 0.25, 0.25)
        )
    reported = score_translations(hyps, refs)["nltk_bleu4"]
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
    assert scores["sacrebleu"] == 0.0 and scores["nltk_bleu4"] == 0.0


def test_a_metric_added_in_one_place_reaches_every_output(trained_run, tmp_path) -> None:
    """One entry appended to `METRICS` and nothing else: test.py's scores.json (the whole set and each
    joined k), its printed summary and TensorBoard scalar, the model card and compare.py's table all
    carry it."""
    import json
    import shutil

    from in_process import run_in_process
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from utils.metrics import METRICS, Metric

    def words(hypotheses: list[str], references: list[str]) -> dict:
        return {"toy_words": round(sum(len(h.split()) for h in hypotheses) / max(1, len(hypotheses)), 3)}

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    METRICS.append(Metric("toy_words", "toy words", 3, +1, words))
    try:
        tested = run_in_process(["test.py", "--run", str(run), "--concat", "1", "2", "--overwrite"])
        assert tested.returncode == 0, tested.stderr[-2000:]
        exported = run_in_process(["export.py", "--run", str(run), "--output", str(tmp_path / "export")])
        assert exported.returncode == 0, exported.stderr[-2000:]
        compared = run_in_process(["compare.py", str(run), "--output", str(tmp_path / "summary")])
        assert compared.returncode == 0, compared.stderr[-2000:]
    finally:
        METRICS.remove(METRICS[-1])
    scores = json.loads((run / "test" / "scores.json").read_text())
    value = scores["toy_words"]
    assert value > 0 and [row["toy_words"] for row in scores["concat"]] and "toy words" in tested.stdout
    events = EventAccumulator(str(run / "tb"))
    events.Reload()
    assert [e.value for e in events.Scalars("test/toy_words")] == pytest.approx([value])
    assert f"- toy words {value:.3f}" in (tmp_path / "export" / "README.md").read_text()
    table = (tmp_path / "summary.md").read_text()
    assert "test toy words" in table and f"{value:.3f}" in table


def test_the_parts_of_a_test_set_are_scored_by_the_registry(monkeypatch) -> None:
    """Issue 68: score_subset hard-coded sacreBLEU and chrF; it scores the registry's `by_subset` metrics."""
    import utils.metrics as metrics

    hyps, refs = ["the cat sat", "a dog ran", "hello"], ["the cat sat", "the dog ran", "hello there"]
    keep = [True, True, False]
    scored = metrics.score_subset(hyps, refs, keep)
    assert list(scored) == ["num_sentences", "sacrebleu", "chrf", "length_ratio"] and scored["num_sentences"] == 2
    assert scored["sacrebleu"] == metrics.sacrebleu_scores(hyps[:2], refs[:2])["sacrebleu"]
    words = metrics.Metric(
        "words", "words", 0, +1, lambda h, r: {"words": sum(len(x.split()) for x in h)}, by_subset=True
    )
    monkeypatch.setattr(metrics, "METRICS", [*metrics.METRICS, words])
    assert metrics.score_subset(hyps, refs, keep)["words"] == 6
    assert metrics.score_subset(hyps, refs, [False] * 3) == {
        "num_sentences": 0,
        "sacrebleu": None,
        "chrf": None,
        "words": None,
        "length_ratio": None,
    }


def test_the_checkpoint_metrics_are_the_registrys_validation_metrics() -> None:
    import typing

    from settings.schema import TrainingConfig
    from utils.metrics import METRIC_SIGN, VALIDATION_METRICS

    allowed = typing.get_args(typing.get_type_hints(TrainingConfig)["checkpoint_metric"])
    assert list(allowed) == [m.name for m in VALIDATION_METRICS] == list(METRIC_SIGN)
    assert METRIC_SIGN == {"valid_loss": -1.0, "valid_bleu": 1.0, "valid_accuracy": 1.0}
