"""Helpers shared by the test modules: running the real entry points on tiny data, reading
their outputs, and building small corpora. (The tiny trained run is a fixture in conftest.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tiny_overrides(run_dir: Path, cache_dir: Path, steps: int = 6) -> list[str]:
    sets = [
        f"run_dir={run_dir}", f"data.cache_dir={cache_dir}", "data.max_train_pairs=400", "data.valid_size=12",
        "data.test_size=10", "tokenizer.vocab_size=400", "model.d_model=32", "model.num_heads=4",
        "model.ffn_dim=64", "model.num_encoder_layers=1", "model.num_decoder_layers=1",
        f"training.max_steps={steps}", "training.validate_every_steps=3", "training.max_tokens=300",
        "training.bleu_sentences=4", "training.log_every=2", "training.num_threads=1", "training.keep_best=2",
        "decoding.beam_size=2", "decoding.max_len_b=5", "decoding.max_len_a=1.0",
    ]
    return [x for s in sets for x in ("--set", s)]


def run(args: list[str], cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          input=stdin, timeout=300)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def torchrun(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*TORCHRUN, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


CONFIG = "configs/demo/sinusoidal.yaml"


def train(run_dir: Path, cache: Path, *extra: str, steps: int = 4, flags: tuple[str, ...] = ()):
    return run(["train.py", "--config", CONFIG, *tiny_overrides(run_dir, cache, steps=steps),
                "--set", "training.bleu_sentences=0", *[x for e in extra for x in ("--set", e)], *flags])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def final_params(run_dir: Path):
    from training.checkpoint import read_checkpoint

    last = max((run_dir / "checkpoints").glob("last_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    return read_checkpoint(last)["model"]


def losses(run_dir: Path) -> dict[int, float]:
    """Training loss per step of the run its checkpoints continue (JsonlLogger.history)."""
    from utils.runtime import JsonlLogger
    return {r["step"]: r["loss"] for r in JsonlLogger(run_dir / "metrics.jsonl").history() if r["event"] == "train"}


def write_parquet_dir(root: Path, config: str, split_dir: dict[str, list[tuple[str, str]]]):
    import datasets
    for folder, pairs in split_dir.items():
        out = root / config / folder
        out.mkdir(parents=True)
        rows = [{"translation": {"en": en, "fr": fr}} for fr, en in pairs]
        datasets.Dataset.from_list(rows).to_parquet(str(out / "0000.parquet"))


def tiny_model(name: str = "sinusoidal", seed: int = 0, *, vocab: int = 50, d_model: int = 32, heads: int = 4,
               layers: int = 2, ffn_dim: int = 64, encoder_pe=None, decoder_pe=None, **options):
    """A small eval-mode `Seq2SeqTransformer` (pad id 0, no dropout) whose encoder and decoder use the
    registered encoding `name` with `options` (that encoding's options; a learnable table has 64 rows
    unless given), or the given encoding modules."""
    import torch

    from models.positional_encodings import build_positional_encoding
    from models.transformer import Seq2SeqTransformer
    from utils.config import PositionalConfig

    torch.manual_seed(seed)
    if encoder_pe is None:
        cfg = PositionalConfig(name=name, options={"max_positions": 64, **options} if name == "learnable" else options)
        encoder_pe = build_positional_encoding(cfg, d_model, heads, causal=False)
        decoder_pe = build_positional_encoding(cfg, d_model, heads, causal=True)
    model = Seq2SeqTransformer(src_vocab_size=vocab, tgt_vocab_size=vocab, pad_id=0, encoder_pe=encoder_pe,
                               decoder_pe=decoder_pe, d_model=d_model, num_heads=heads, num_encoder_layers=layers,
                               num_decoder_layers=layers, ffn_dim=ffn_dim, dropout=0.0)
    return model.eval()
