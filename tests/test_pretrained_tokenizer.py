"""The `pretrained` tokenizer path (the report's Marian tokenizer) without network access.

A Marian tokenizer is built locally from two tiny SentencePiece models (separate source and
target vocabularies, as in Helsinki-NLP/opus-mt-fr-en), saved with `save_pretrained`, and loaded
by folder name exactly as a hub name would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenizer import PretrainedTokenizer, TokenizerError, load_or_train_tokenizer, tokenizer_from_state_dict
from utils.config import TokenizerConfig

ROOT = Path(__file__).resolve().parents[1]
FR = ["Bonjour le monde.", "Je t'aime beaucoup.", "Où est la gare ?", "Il fait beau aujourd'hui."]
EN = ["Hello world.", "I love you very much.", "Where is the station?", "The weather is nice today."]


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory) -> Path:
    import sentencepiece as spm
    from transformers import MarianTokenizer

    d = tmp_path_factory.mktemp("marian")
    for name, lines in (("source", FR * 30), ("target", EN * 30)):
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(d / name), vocab_size=35,
                                       model_type="unigram", character_coverage=1.0, minloglevel=2)
    vocab = {"</s>": 0, "<unk>": 1}
    for name in ("source", "target"):
        sp = spm.SentencePieceProcessor(model_file=str(d / f"{name}.model"))
        for i in range(sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    (d / "vocab.json").write_text(json.dumps(vocab))
    tok = MarianTokenizer(str(d / "source.model"), str(d / "target.model"), str(d / "vocab.json"))
    tok.save_pretrained(str(d / "opus-mt-tiny"))
    return d / "opus-mt-tiny"


def test_marian_style_tokenizer_interface(marian_dir: Path, tmp_path: Path) -> None:
    cfg = TokenizerConfig(type="pretrained", name=str(marian_dir))
    tok = load_or_train_tokenizer(cfg, None, tmp_path)
    assert isinstance(tok, PretrainedTokenizer)
    assert tok.bos_id == tok.pad_id  # Marian starts decoding from <pad>
    assert tok.eos_id == 0 and tok.pad_id == tok.src_vocab_size - 1
    src = tok.encode_src("Bonjour le monde.")
    assert src and tok.eos_id not in src and tok.pad_id not in src
    assert tok.decode(tok.encode_tgt("Hello world.")) == "Hello world."
    restored = tokenizer_from_state_dict(tok.state_dict())
    assert restored.encode_src("Où est la gare ?") == tok.encode_src("Où est la gare ?")
    assert restored.fingerprint == tok.fingerprint
    assert (tmp_path / "tokenizer").is_dir()  # saved in the run folder


def test_missing_pretrained_tokenizer_says_what_to_do(tmp_path: Path) -> None:
    cfg = TokenizerConfig(type="pretrained", name=str(tmp_path / "no-such-tokenizer"))
    with pytest.raises(TokenizerError, match="save_pretrained"):
        load_or_train_tokenizer(cfg, None, tmp_path / "run")


def test_train_and_translate_with_a_pretrained_tokenizer(marian_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{f}\t{e}\n" for f, e in zip(FR * 5, EN * 5)), encoding="utf-8")
    sets = [f"run_dir={tmp_path / 'run'}", f"data.cache_dir={tmp_path / 'cache'}", "data.source=parallel_text",
            f"data.train={{tsv: {corpus}}}", f"data.valid={{tsv: {corpus}}}", f"data.test={{tsv: {corpus}}}",
            "tokenizer.type=pretrained", f"tokenizer.name={marian_dir}", "model.share_embeddings=false",
            "model.d_model=16", "model.num_heads=2", "model.ffn_dim=32", "model.num_encoder_layers=1",
            "model.num_decoder_layers=1", "training.max_steps=2", "training.validate_every_steps=2",
            "training.max_tokens=200", "training.bleu_sentences=2", "training.num_threads=1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = [x for s in sets for x in ("--set", s)]
    proc = subprocess.run([sys.executable, "train.py", "--config", "configs/demo/sinusoidal.yaml", *args],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = next((tmp_path / "run" / "checkpoints").glob("best_*.pt"))
    out = subprocess.run([sys.executable, "inference.py", "--model_path", str(ckpt), "--src_text", "Bonjour."],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(out.stdout.splitlines()) == 1
