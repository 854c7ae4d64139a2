"""One tokenizer interface for source and target text.

- `BPETokenizer`: a joint (French+English) BPE trained on the training split with Hugging Face
  `tokenizers` (SentencePiece-style `▁` word boundaries, NFC normalisation), saved as one JSON file.
- `PretrainedTokenizer`: any Hugging Face tokenizer by name or local directory through
  `transformers` (e.g. `Helsinki-NLP/opus-mt-fr-en`, the original report's choice: separate
  source and target SentencePiece models over one shared vocabulary; other Marian models have
  separate vocabularies too).

Both expose: `encode_src`, `encode_tgt` (lists of ids, no BOS/EOS), `decode` (target ids -> text),
`pad_id`, `bos_id`, `eos_id`, `unk_id`, vocabulary sizes, `shared_vocab` (one id space for both
sides, so embeddings can be shared), and `state_dict()` so a checkpoint can carry the tokenizer
and be used with no other file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from utils.errors import HarnessError
from utils.files import atomic_write_text
from utils.user_paths import looks_like_a_path

SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>"]


class BaseTokenizer:
    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int
    src_vocab_size: int
    tgt_vocab_size: int
    shared_vocab: bool = True  # source and target ids name the same subwords
    kind: str

    def encode_src(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode_tgt(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Iterable[int]) -> str:
        raise NotImplementedError

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_src(t) for t in texts]

    def encode_tgt_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_tgt(t) for t in texts]

    def tokens(self, ids: Iterable[int], side: str = "tgt") -> list[str]:
        """Subword strings for ids (plot labels)."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def save(self, directory: str | Path) -> Path:
        raise NotImplementedError

    @property
    def fingerprint(self) -> str:
        """A stable hash of the tokenizer (keys the encoded-data cache)."""
        import hashlib

        return hashlib.sha256(json.dumps(self.state_dict(), sort_keys=True).encode()).hexdigest()[:16]


class BPETokenizer(BaseTokenizer):
    """Joint BPE from Hugging Face `tokenizers`; ids 0-3 are <pad>, <unk>, <s>, </s>."""

    kind = "bpe"
    filename = "tokenizer.json"

    def __init__(self, hf_tokenizer) -> None:
        self._tok = hf_tokenizer
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = (hf_tokenizer.token_to_id(t) for t in SPECIAL_TOKENS)
        if None in (self.pad_id, self.unk_id, self.bos_id, self.eos_id):
            raise ValueError(f"tokenizer lacks one of the special tokens {SPECIAL_TOKENS}")
        self.src_vocab_size = self.tgt_vocab_size = hf_tokenizer.get_vocab_size()

    @classmethod
    def train(cls, texts: Iterator[str] | list[str], vocab_size: int, min_frequency: int = 2) -> "BPETokenizer":
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS, show_progress=False
        )
        tok.train_from_iterator(texts, trainer=trainer)
        return cls(tok)

    @classmethod
    def from_json(cls, text: str) -> "BPETokenizer":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text))

    @classmethod
    def load(cls, path: str | Path) -> "BPETokenizer":
        path = Path(path)
        if path.is_dir():
            path = path / cls.filename
        try:
            return cls.from_json(path.read_text(encoding="utf-8"))
        except Exception as e:  # truncated, not JSON, not a tokenizer: the tokenizers library's message
            raise TokenizerError(
                f"{path} is not a readable tokenizer ({' '.join(str(e).split())[:160]}); a "
                f"checkpoint of the run holds its tokenizer: restore the file from a copy of "
                f"the run"
            ) from None

    def encode_src(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    encode_tgt = encode_src

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    encode_tgt_batch = encode_src_batch

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def tokens(self, ids: Iterable[int], side: str = "tgt") -> list[str]:
        return [self._tok.id_to_token(int(i)) or "<?>" for i in ids]

    def state_dict(self) -> dict:
        return {"kind": self.kind, "json": self._tok.to_str()}

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / self.filename
        atomic_write_text(path, self._tok.to_str(pretty=False))
        return path


class TokenizerError(HarnessError, ValueError):
    """A tokenizer cannot be loaded or trained; the message names the setting and the fix."""


class PretrainedTokenizer(BaseTokenizer):
    """A Hugging Face `transformers` tokenizer (e.g. Marian's separate source/target SentencePiece)."""

    kind = "pretrained"
    dirname = "tokenizer"

    def __init__(self, hf_tokenizer, name: str) -> None:
        self._tok = hf_tokenizer
        self.name = name
        self.pad_id = hf_tokenizer.pad_token_id
        self.eos_id = hf_tokenizer.eos_token_id
        self.unk_id = hf_tokenizer.unk_token_id
        # Marian has no BOS: its decoder starts from <pad> (decoder_start_token_id).
        self.bos_id = hf_tokenizer.bos_token_id if hf_tokenizer.bos_token_id is not None else self.pad_id
        self.src_vocab_size = self.tgt_vocab_size = len(hf_tokenizer)
        # Marian: a target SentencePiece model of its own (decode with it, not transformers' default
        # of the source model when the vocabulary is shared), and maybe a target vocabulary of its own.
        marian = hasattr(hf_tokenizer, "spm_target")
        self._decode_options = {"use_source_tokenizer": False} if marian else {}
        # One vocabulary when the tokenizer says so, or when its two vocabularies are the same.
        self.shared_vocab = (
            not getattr(hf_tokenizer, "separate_vocabs", False) or hf_tokenizer.encoder == hf_tokenizer.target_encoder
        )
        if not self.shared_vocab:
            target = hf_tokenizer.target_encoder  # (get_tgt_vocab() fails in transformers 5.23)
            self.tgt_vocab_size = max(target.values()) + 1
            specials = {"pad": self.pad_id, "eos": self.eos_id, "unk": self.unk_id}
            differ = [k for k, i in specials.items() if target.get(getattr(hf_tokenizer, f"{k}_token")) != i]
            if differ:
                raise TokenizerError(
                    f"tokenizer.name={name}: the target vocabulary numbers its special tokens "
                    f"({', '.join(differ)}) differently from the source vocabulary; this harness "
                    f"uses one id per special token on both sides"
                )

    @classmethod
    def from_folder(cls, folder: str | Path, name: Optional[str] = None) -> "PretrainedTokenizer":
        """A tokenizer saved in a local folder (save_pretrained), read from it alone: a missing or
        damaged folder is named, never taken for a hub name."""
        from transformers import AutoTokenizer

        folder = Path(os.path.expanduser(folder))  # tokenizer.name: ~/tok, as data paths are
        if not folder.is_dir():
            raise TokenizerError(f"{folder} is missing: the tokenizer's folder (save_pretrained) is not there")
        try:
            tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except Exception as e:  # a file of it missing or damaged
            raise TokenizerError(
                f"{folder} is not a readable tokenizer folder ({type(e).__name__}: {' '.join(str(e).split())[:200]})"
            ) from None
        return cls(tok, name or str(folder))

    @classmethod
    def from_pretrained(cls, name: str) -> "PretrainedTokenizer":
        from transformers import AutoTokenizer

        if Path(os.path.expanduser(name)).is_dir() or looks_like_a_path(name):  # a local folder: never the hub
            try:
                return cls.from_folder(name, name)
            except TokenizerError as e:
                raise TokenizerError(f"tokenizer.name={name}: could not load the pretrained tokenizer: {e}") from None
        try:
            tok = AutoTokenizer.from_pretrained(name)
        except Exception as e:  # missing folder, no hub access, missing sentencepiece, ...
            reason = " ".join(str(e).split())[:300]
            raise TokenizerError(
                f"tokenizer.name={name}: could not load the pretrained tokenizer ({type(e).__name__}: {reason}). "
                f"Without Hugging Face hub access, download it elsewhere "
                f"(`AutoTokenizer.from_pretrained({name!r}).save_pretrained('DIR')`), copy DIR here and set "
                f"tokenizer.name: DIR; or use tokenizer.type: bpe, which trains on the corpus."
            ) from e
        return cls(tok, name)

    def encode_src(self, text: str) -> list[int]:
        return self._strip(self._tok(text, add_special_tokens=False)["input_ids"])

    def encode_tgt(self, text: str) -> list[int]:
        return self._strip(self._tok(text_target=text, add_special_tokens=False)["input_ids"])

    def _strip(self, ids: list[int]) -> list[int]:
        return [i for i in ids if i not in (self.eos_id, self.pad_id)]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True, **self._decode_options)

    def tokens(self, ids: Iterable[int], side: str = "tgt") -> list[str]:
        ids = [int(i) for i in ids]
        if side == "src" and not self.shared_vocab:
            source = {i: piece for piece, i in self._tok.encoder.items()}
            return [source.get(i, "<?>") for i in ids]
        return self._tok.convert_ids_to_tokens(ids)

    def state_dict(self) -> dict:
        """All tokenizer files as bytes (name -> content), so a checkpoint is self-contained."""
        with tempfile.TemporaryDirectory() as tmp:
            self._tok.save_pretrained(tmp)
            files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
        return {"kind": self.kind, "name": self.name, "files": files}

    @classmethod
    def from_state_dict(cls, state: dict) -> "PretrainedTokenizer":
        from transformers import AutoTokenizer

        with tempfile.TemporaryDirectory() as tmp:
            for name, content in state["files"].items():
                (Path(tmp) / Path(name).name).write_bytes(content)
            return cls(AutoTokenizer.from_pretrained(tmp, local_files_only=True), state["name"])

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / self.dirname
        self._tok.save_pretrained(path)
        return path

    @property
    def fingerprint(self) -> str:
        import hashlib

        digest = hashlib.sha256()
        for name, content in sorted(self.state_dict()["files"].items()):
            digest.update(name.encode() + b"\0" + content)
        return digest.hexdigest()[:16]


def tokenizer_from_state_dict(state: dict) -> BaseTokenizer:
    if state.get("kind") == "bpe":
        return BPETokenizer.from_json(state["json"])
    if state.get("kind") == "pretrained":
        return PretrainedTokenizer.from_state_dict(state)
    raise ValueError(f"unknown tokenizer kind in checkpoint: {state.get('kind')!r}")


def load_or_train_tokenizer(
    cfg,
    train_pairs: Optional[list[tuple[str, str]] | Callable[[], list]],
    run_dir: Path,
    log=print,
    cache_path: Optional[Path] = None,
) -> BaseTokenizer:
    """Builder: reuse the run's saved tokenizer, else train a BPE on the training split (or load a pretrained one).

    `train_pairs` may be a callable (read only if training is needed). `cache_path`, keyed by the
    caller on the corpus and tokenizer settings, lets runs on the same data share one trained BPE.
    """
    if cfg.type == "pretrained":
        saved = run_dir / PretrainedTokenizer.dirname
        if saved.is_dir():
            from transformers import AutoTokenizer

            return PretrainedTokenizer(AutoTokenizer.from_pretrained(saved, local_files_only=True), cfg.name)
        tok = PretrainedTokenizer.from_pretrained(cfg.name)
        tok.save(run_dir)
        return tok
    saved = run_dir / BPETokenizer.filename
    if saved.is_file():
        log(f"tokenizer: reusing {saved}")
        return BPETokenizer.load(saved)
    if cache_path is not None and cache_path.is_file():
        log(f"tokenizer: reusing {cache_path} (same corpus and tokenizer settings)")
        tok = BPETokenizer.load(cache_path)
        tok.save(run_dir)
        return tok
    if callable(train_pairs):
        train_pairs = train_pairs()
    if not train_pairs:
        raise ValueError("cannot train the BPE tokenizer: the training split is empty")
    log(f"tokenizer: training a joint BPE (vocab {cfg.vocab_size}) on {len(train_pairs):,} training pairs")

    def texts() -> Iterator[str]:
        for src, tgt in train_pairs:
            yield src
            yield tgt

    tok = BPETokenizer.train(texts(), cfg.vocab_size, cfg.min_frequency)
    tok.save(run_dir)
    if cache_path is not None:
        atomic_write_text(cache_path, tok.state_dict()["json"])  # the same text as tok.save wrote
    return tok
