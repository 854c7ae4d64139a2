"""The `pretrained` tokenizer path (the report's Marian tokenizer) without network access.

Marian tokenizers are built locally from tiny SentencePiece models, saved with `save_pretrained`
and loaded by folder name exactly as a hub name would be: one with a shared vocabulary (as
Helsinki-NLP/opus-mt-fr-en) whose target SentencePiece model differs from the source one (byte
fallback), and one with separate source and target vocabularies of different sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import one_error_line
from in_process import run_in_process as run

from settings.config import TokenizerConfig
from tokenizer import PretrainedTokenizer, TokenizerError, load_or_train_tokenizer, tokenizer_from_state_dict

FR = ["Bonjour le monde.", "Je t'aime beaucoup.", "Où est la gare ?", "Il fait beau aujourd'hui."]
EN = ["Hello world.", "I love you very much.", "Where is the station?", "The weather is nice today."]
# Target text with characters the target model never saw: it spells them with byte pieces
# (<0xC3><0xA9>), which only the target model (trained with byte_fallback) decodes back.
UNSEEN = "Où is the café?"


def build_marian(folder: Path, separate_vocabs: bool) -> Path:
    import sentencepiece as spm
    from transformers import MarianTokenizer

    folder.mkdir(parents=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(FR * 30),
        model_prefix=str(folder / "source"),
        vocab_size=35,
        model_type="unigram",
        character_coverage=1.0,
        minloglevel=2,
    )
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(EN * 30),
        model_prefix=str(folder / "target"),
        vocab_size=300,
        model_type="unigram",
        character_coverage=1.0,
        minloglevel=2,
        byte_fallback=True,
        hard_vocab_limit=False,
    )

    def pieces(name: str) -> list[str]:
        sp = spm.SentencePieceProcessor(model_file=str(folder / f"{name}.model"))
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]

    def vocab(names: list[str], pad_at: int | None = None) -> dict:
        out = {"</s>": 0, "<unk>": 1}
        for name in names:
            for piece in pieces(name):
                if pad_at is not None and len(out) == pad_at:
                    out["<pad>"] = pad_at
                out.setdefault(piece, len(out))
        out.setdefault("<pad>", len(out))
        return out

    if separate_vocabs:
        source = vocab(["source"])
        (folder / "vocab.json").write_text(json.dumps(source))
        (folder / "target_vocab.json").write_text(json.dumps(vocab(["target"], pad_at=source["<pad>"])))
        tok = MarianTokenizer(
            str(folder / "source.model"),
            str(folder / "target.model"),
            str(folder / "vocab.json"),
            target_vocab_file=str(folder / "target_vocab.json"),
            separate_vocabs=True,
        )
    else:
        (folder / "vocab.json").write_text(json.dumps(vocab(["source", "target"])))
        tok = MarianTokenizer(str(folder / "source.model"), str(folder / "target.model"), str(folder / "vocab.json"))
    tok.save_pretrained(str(folder / "saved"))
    return folder / "saved"


@pytest.fixture(scope="module")
def marian_shared(tmp_path_factory) -> Path:
    return build_marian(tmp_path_factory.mktemp("marian") / "shared", separate_vocabs=False)


@pytest.fixture(scope="module")
def marian_separate(tmp_path_factory) -> Path:
    return build_marian(tmp_path_factory.mktemp("marian") / "separate", separate_vocabs=True)


def test_marian_style_tokenizer_interface(marian_shared: Path, tmp_path: Path) -> None:
    cfg = TokenizerConfig(type="pretrained", name=str(marian_shared))
    tok = load_or_train_tokenizer(cfg, None, tmp_path)
    assert isinstance(tok, PretrainedTokenizer) and tok.shared_vocab
    assert tok.bos_id == tok.pad_id  # Marian starts decoding from <pad>
    assert tok.eos_id == 0 and tok.pad_id == tok.src_vocab_size - 1 == tok.tgt_vocab_size - 1
    src = tok.encode_src("Bonjour le monde.")
    assert src and tok.eos_id not in src and tok.pad_id not in src
    assert tok.decode(tok.encode_tgt("Hello world.")) == "Hello world."
    restored = tokenizer_from_state_dict(tok.state_dict())
    assert restored.encode_src("Où est la gare ?") == tok.encode_src("Où est la gare ?")
    assert restored.fingerprint == tok.fingerprint
    assert (tmp_path / "tokenizer").is_dir()  # saved in the run folder


def test_targets_are_decoded_with_the_target_model(marian_shared: Path) -> None:
    """transformers decodes with the *source* SentencePiece model when the vocabulary is shared;
    target ids must go through the target model (use_source_tokenizer=False)."""
    tok = PretrainedTokenizer.from_pretrained(str(marian_shared))
    ids = tok.encode_tgt(UNSEEN)
    assert "<0xC3>" in tok.tokens(ids)  # spelled with byte pieces
    assert tok._tok.decode(ids, skip_special_tokens=True) != UNSEEN  # the library default: the source model
    assert tok.decode(ids) == UNSEEN
    assert tokenizer_from_state_dict(tok.state_dict()).decode(ids) == UNSEEN


def test_separate_target_vocabulary_sets_the_target_size(marian_separate: Path) -> None:
    tok = PretrainedTokenizer.from_pretrained(str(marian_separate))
    target = json.loads((marian_separate / "target_vocab.json").read_text())
    source = json.loads((marian_separate / "vocab.json").read_text())
    assert not tok.shared_vocab
    assert (tok.src_vocab_size, tok.tgt_vocab_size) == (len(source), len(target)) and len(target) > len(source)
    ids = tok.encode_tgt(UNSEEN)
    assert max(ids) >= tok.src_vocab_size and max(ids) < tok.tgt_vocab_size  # target-only ids
    assert tok.decode(ids) == UNSEEN
    by_id = {i: piece for piece, i in source.items()}
    src = tok.encode_src("Bonjour")
    assert tok.tokens(src, side="src") == [by_id[i] for i in src]
    restored = tokenizer_from_state_dict(tok.state_dict())
    assert (restored.tgt_vocab_size, restored.decode(ids)) == (tok.tgt_vocab_size, UNSEEN)


def test_two_identical_vocabularies_count_as_one(marian_shared: Path, tmp_path: Path) -> None:
    """A tokenizer saved with separate_vocabs=True whose two vocabularies are the same file is one
    shared vocabulary (so share_embeddings is allowed)."""
    from transformers import MarianTokenizer

    saved = marian_shared
    tok = MarianTokenizer(
        str(saved / "source.spm"),
        str(saved / "target.spm"),
        str(saved / "vocab.json"),
        target_vocab_file=str(saved / "vocab.json"),
        separate_vocabs=True,
    )
    tok.save_pretrained(str(tmp_path / "same"))
    loaded = PretrainedTokenizer.from_pretrained(str(tmp_path / "same"))
    assert loaded._tok.separate_vocabs and loaded.shared_vocab
    assert loaded.tgt_vocab_size == loaded.src_vocab_size


def test_missing_pretrained_tokenizer_says_what_to_do(tmp_path: Path) -> None:
    cfg = TokenizerConfig(type="pretrained", name=str(tmp_path / "no-such-tokenizer"))
    with pytest.raises(TokenizerError, match="save_pretrained"):
        load_or_train_tokenizer(cfg, None, tmp_path / "run")


def train_with(tokenizer_dir: Path, tmp_path: Path, *sets: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{f}\t{e}\n" for f, e in zip(FR * 5, EN * 5)), encoding="utf-8")
    sets = [
        f"run_dir={tmp_path / 'run'}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "data.source=parallel_text",
        f"data.train={{tsv: {corpus}}}",
        f"data.valid={{tsv: {corpus}}}",
        f"data.test={{tsv: {corpus}}}",
        "tokenizer.type=pretrained",
        f"tokenizer.name={tokenizer_dir}",
        "model.d_model=16",
        "model.num_heads=2",
        "model.ffn_dim=32",
        "model.num_encoder_layers=1",
        "model.num_decoder_layers=1",
        "training.max_steps=2",
        "training.validate_every_steps=2",
        "training.max_tokens=200",
        "training.bleu_sentences=2",
        "training.num_threads=1",
        "training.tensorboard_images_every=0",
        *sets,
    ]
    return run(["train.py", "--config", "configs/demo/sinusoidal.yaml", *[x for s in sets for x in ("--set", s)]])


def test_train_and_translate_with_separate_vocabularies(marian_separate: Path, tmp_path: Path) -> None:
    refused = one_error_line(train_with(marian_separate, tmp_path / "shared", "model.share_embeddings=true"))
    assert "model.share_embeddings" in refused and "separate source and target vocabularies" in refused
    assert not (tmp_path / "shared" / "run").exists()  # refused before the run folder was made
    proc = train_with(marian_separate, tmp_path, "model.share_embeddings=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = next((tmp_path / "run" / "checkpoints").glob("best_*.pt"))
    out = run(["inference.py", "--model_path", str(ckpt), "--src_text", "Bonjour."])
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(out.stdout.splitlines()) == 1
    from artifacts.loading import load_model

    loaded = load_model(ckpt)

    tok, model = loaded.tokenizer, loaded.model
    assert model.output_proj.out_features == tok.tgt_vocab_size != tok.src_vocab_size


def test_a_shared_pretrained_vocabulary_shares_embeddings(marian_shared: Path, tmp_path: Path) -> None:
    proc = train_with(marian_shared, tmp_path, "model.share_embeddings=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from artifacts.loading import load_model

    loaded = load_model(next((tmp_path / "run" / "checkpoints").glob("best_*.pt")))

    tok, model = loaded.tokenizer, loaded.model
    assert model.src_embed is model.tgt_embed and tok.shared_vocab
