"""The joint BPE tokenizer (tokenizer/): special ids, round trips, compression, state and cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings.config import TokenizerConfig
from tokenizer import BPETokenizer, load_or_train_tokenizer, tokenizer_from_state_dict


def training_sentences() -> list[str]:
    subjects_fr = ["Je", "Tu", "Il", "Elle", "Nous", "Vous", "L'hôtel", "Le garçon", "La fille", "Où"]
    objects_fr = [
        "l'école",
        "le marché",
        "la forêt",
        "l'hôtel",
        "le café",
        "la gare",
        "l'île",
        "le théâtre",
        "la côte",
        "le château",
    ]
    subjects_en = ["I", "You", "He", "She", "We", "They", "The hotel", "The boy", "The girl", "Where"]
    objects_en = [
        "school",
        "the market",
        "the forest",
        "the hotel",
        "the coffee shop",
        "the station",
        "the island",
        "the theatre",
        "the coast",
        "the castle",
    ]
    sentences = []
    for i in range(10):
        for j in range(10):
            k = (i * 10 + j) % 4
            end_fr = [" ?", " !", ".", " ?"][k]
            end_en = ["?", "!", ".", "?"][k]
            sentences.append(f"{subjects_fr[i]} va à {objects_fr[j]}{end_fr} Ça coûte {i + j} €.")
            sentences.append(f"{subjects_en[i]} goes to {objects_en[j]}{end_en} It costs {i + j} euros: it's true.")
    sentences += [
        "Où est la gare ? Il coûte 20 €.",
        "Qu'est-ce que c'est ? Voilà, très bien !",
        "Garçon, l'addition s'il vous plaît.",
        "Noël, été, pêche, naïf, maïs, cœur, où, dû.",
    ]
    return sentences


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.train(training_sentences(), vocab_size=300, min_frequency=2)


def test_bpe_special_ids(bpe):
    assert (bpe.pad_id, bpe.unk_id, bpe.bos_id, bpe.eos_id) == (0, 1, 2, 3)
    assert bpe.tokens([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert bpe.src_vocab_size == bpe.tgt_vocab_size <= 300


@pytest.mark.parametrize(
    "text",
    ["Où est l'hôtel ? Il coûte 20 €.", "L'été, la fille va à l'île !", "It's true: the boy goes to the castle."],
)
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
