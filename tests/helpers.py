"""Helpers shared by the test modules: running the real entry points on tiny data, reading
their outputs, and building small corpora. (The tiny trained run is a fixture in conftest.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# Every 80th line of the shipped Tatoeba file (data/corpora/tatoeba-fr-en/fra-eng.tsv.gz, same format,
# same length spread): the tiny runs take 400 training pairs either way, but reading and splitting the
# whole 167k-line file costs each training and each test.py about 6 s.
TINY_CORPUS = ROOT / "tests" / "fixtures" / "tatoeba-sample.tsv.gz"


def with_sets(flags: list[str], *sets: str) -> list[str]:
    """`--set` flags `flags` with `sets` (KEY=VALUE) added, each replacing an earlier value of its key
    (a key given twice with different values is refused: commands/cli.py)."""
    keys = {item.partition("=")[0] for item in sets}
    kept = [v for v in flags[1::2] if v.partition("=")[0] not in keys]
    return [x for v in (*kept, *sets) for x in ("--set", v)]


def tiny_overrides(run_dir: Path, cache_dir: Path, steps: int = 6, images: bool = False) -> list[str]:
    """`--set` flags for a tiny run of `steps` steps on TINY_CORPUS. Without `images`, no attention
    maps or position tables go to TensorBoard (their figures cost a tiny run 2-3 s): the trained_run
    fixture and the tests that read them ask for them."""
    sets = [
        f"run_dir={run_dir}",
        f"data.cache_dir={cache_dir}",
        f"data.path={TINY_CORPUS}",
        "data.max_train_pairs=400",
        "data.valid_size=12",
        "data.test_size=10",
        "tokenizer.vocab_size=400",
        "model.d_model=32",
        "model.num_heads=4",
        "model.ffn_dim=64",
        "model.num_encoder_layers=1",
        "model.num_decoder_layers=1",
        f"training.max_steps={steps}",
        "training.validate_every_steps=3",
        "training.max_tokens=300",
        "training.bleu_sentences=4",
        "training.log_every=2",
        "training.num_threads=1",
        "training.keep_best=2",
        "decoding.beam_size=2",
        "decoding.max_len_b=5",
        "decoding.max_len_a=1.0",
        "training.bleu_max_len_b=5",  # validation BLEU's own search (decoding.* is the test-time one)
        "training.bleu_max_len_a=1.0",
        *([] if images else ["training.tensorboard_images_every=0"]),
    ]
    return [x for s in sets for x in ("--set", s)]


def run(args: list[str], cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=env, input=stdin, timeout=300
    )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def torchrun(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*TORCHRUN, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


CONFIG = "configs/demo/sinusoidal.yaml"


def train(run_dir: Path, cache: Path, *extra: str, steps: int = 4, flags: tuple[str, ...] = ()):
    """A tiny sinusoidal training through train.py, in this process (tests/in_process.py)."""
    from in_process import run_in_process

    sets = with_sets(tiny_overrides(run_dir, cache, steps=steps), "training.bleu_sentences=0", *extra)
    return run_in_process(["train.py", "--config", CONFIG, *sets, *flags])


def plain_copy(name: str, target: Path) -> Path:
    """An archived run (results/<name>) as the plain run folder test.py wrote, at `target`."""
    from tools.archive import unpack_run

    unpack_run(ROOT / "results" / name, target)
    return target


def copy_of(run_dir: Path, target: Path) -> Path:
    """A copy of a run folder at `target`, without its lock's files."""
    import shutil

    shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns(".lock", ".lock.pid"))
    return target


def scored_and_sinusoidal(trained_run: Path, folder: Path) -> tuple[Path, Path]:
    """`trained_run` scored once by test.py (no teacher-forced diagnostic: cheaper), and a copy of it
    in `folder` whose config.yaml says sinusoidal: two configurations compare.py pairs sentence by sentence."""

    from in_process import run_in_process

    proc = run_in_process(["test.py", "--run", str(trained_run), "--set", "evaluation.teacher_forced=false"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return trained_run, relabelled(copy_of(trained_run, folder / "sinusoidal"))


def relabelled(run_dir: Path, encoding: str = "sinusoidal") -> Path:
    """A tested run made to stand for another encoding: its config.yaml and what each of its tests
    recorded of the model (scores.json: compare.py refuses a config.yaml that says otherwise)."""
    import re

    config = run_dir / "config.yaml"
    text = re.sub(r"(  positional:\n)(    .*\n)+", rf"\1    name: {encoding}\n", config.read_text())
    assert f"name: {encoding}" in text
    config.write_text(text)
    for path in run_dir.glob("test*/scores.json"):
        scores = json.loads(path.read_text())
        scores["positional"] = encoding
        scores.get("model", {})["positional"] = {"name": encoding}
        path.write_text(json.dumps(scores, indent=2) + "\n")
    return run_dir


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes, the run lock's file aside (not content: a command
    that reads a run locks it, and the OS lock's file stays)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in (".lock", ".lock.pid")
    }


def one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def final_params(run_dir: Path):
    from artifacts.checkpoint import read_checkpoint

    last = max((run_dir / "checkpoints").glob("last_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    return read_checkpoint(last)["model"]


def losses(run_dir: Path) -> dict[int, float]:
    """Training loss per step of the run its checkpoints continue (JsonlLogger.history)."""
    from utils.run_log import JsonlLogger

    return {r["step"]: r["loss"] for r in JsonlLogger(run_dir / "metrics.jsonl").history() if r["event"] == "train"}


def write_parquet_dir(root: Path, config: str, split_dir: dict[str, list[tuple[str, str]]]):
    import datasets

    for folder, pairs in split_dir.items():
        out = root / config / folder
        out.mkdir(parents=True)
        rows = [{"translation": {"en": en, "fr": fr}} for fr, en in pairs]
        datasets.Dataset.from_list(rows).to_parquet(str(out / "0000.parquet"))


def tiny_model(
    name: str = "sinusoidal",
    seed: int = 0,
    *,
    vocab: int = 50,
    d_model: int = 32,
    heads: int = 4,
    layers: int = 2,
    ffn_dim: int = 64,
    pad_id: int = 0,
    encoder_pe=None,
    decoder_pe=None,
    **options,
):
    """A small eval-mode `Seq2SeqTransformer` (no dropout) whose encoder and decoder use the
    registered encoding `name` with `options` (that encoding's options; a learnable table has 64 rows
    unless given), or the given encoding modules."""
    import torch

    from models.positional_encodings import build_positional_encoding
    from models.transformer import Seq2SeqTransformer
    from settings.config import PositionalConfig

    torch.manual_seed(seed)
    if encoder_pe is None:
        cfg = PositionalConfig(name=name, options={"max_positions": 64, **options} if name == "learnable" else options)
        encoder_pe = build_positional_encoding(cfg, d_model, heads, causal=False)
        decoder_pe = build_positional_encoding(cfg, d_model, heads, causal=True)
    model = Seq2SeqTransformer(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        pad_id=pad_id,
        encoder_pe=encoder_pe,
        decoder_pe=decoder_pe,
        d_model=d_model,
        num_heads=heads,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        ffn_dim=ffn_dim,
        dropout=0.0,
    )
    return model.eval()


# ---- decoding tests: token ids, the encodings to run every check on, batches, the cache reference

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # the ids tiny_model's callers use (pad 0)
VOCAB = 50
D_MODEL, HEADS = 32, 4


def encoding_cases():
    """Every registered encoding (future ones included), plus RoPE variants, as pytest params."""
    from models.positional_encodings import POSITIONAL_ENCODINGS

    cases = [pytest.param(name, {}, id=name) for name in sorted(POSITIONAL_ENCODINGS)]
    cases.append(pytest.param("rope", {"cross_attention": True}, id="rope-cross"))
    cases.append(pytest.param("rope", {"layout": "interleaved", "fraction": 0.5}, id="rope-interleaved-half"))
    for name, top in (("sinusoidal", 256), ("learnable", 64), ("rope", 256)):
        cases.append(pytest.param(name, {"randomized": True, "max_position": top}, id=f"{name}-randomized"))
    for scaling in (
        "linear",
        "ntk",
    ):  # yarn needs a recorded training length: tests/models/positional_encodings/test_rotary.py
        cases.append(pytest.param("rope", {"scaling": scaling, "scaling_factor": 3.0}, id=f"rope-{scaling}"))
    cases.append(pytest.param("xpos", {"cross_attention": True}, id="xpos-cross"))
    cases.append(pytest.param("fire", {"cross_attention": True}, id="fire-cross"))
    return cases


def mixed_batch(lengths: list[int], seed: int):
    """Right-padded source batch `[batch, max(lengths)]` of random real tokens."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), PAD, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
    return src


def bos_prefixes(rows: int, tokens: int, seed: int) -> torch.Tensor:
    """Teacher-forcing inputs `[rows, 1 + tokens]`: BOS, then random real tokens."""
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.full((rows, 1), BOS), torch.randint(4, VOCAB, (rows, tokens), generator=g)], dim=1)


def trim(row: torch.Tensor) -> torch.Tensor:
    """One padded source row as an unpadded `[1, len]` batch."""
    return row[row.ne(PAD)][None]


def full_and_cached(model, src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits of the model's plain full decode of `tgt`, the same decoded one cached step at a time by
    `decoding.step.CachedDecoder`), no grad."""
    from decoding.step import CachedDecoder

    decoder = CachedDecoder(model)
    with torch.no_grad():
        full = model.decode(tgt, model.encode(src))
        enc = decoder.encode(src)
        cache = decoder.new_cache()
        steps = [decoder.decode_step(tgt[:, t : t + 1], enc, cache, offset=t) for t in range(tgt.size(1))]
    return full, torch.stack(steps, dim=1)


def reference_step(model, history: torch.Tensor, enc, sentence_of_row: torch.Tensor) -> torch.Tensor:
    """Next-token logits `[rows, vocab]` of each row's history, decoded from scratch by the model's plain forward."""
    return model.decode(history, enc.index_select(sentence_of_row))[:, -1]


def give_bias_tables_a_signal(model, seed: int):
    """Learned positional bias tables start at zero: draw them at random so that they matter."""
    for pname, p in model.named_parameters():
        if "_pe." in pname:
            torch.nn.init.normal_(p, generator=torch.Generator().manual_seed(seed))
    return model


def check_random_beam_steps(model, label: str, beams: int = 4, steps: int = 7):
    """3 sentences x `beams` beams, `steps` cached steps of `CachedDecoder(model)`: each step the beams
    of a sentence are re-drawn from its current beams (with repeats, as beam search does); at step 4
    the middle sentence leaves. Asserts that every cached step equals decoding every row's history
    from scratch with the model's plain forward; returns (decoder, cache, enc, sentences, history)
    after the last reorder (enc: the decoder's)."""
    from decoding.step import CachedDecoder

    decoder = CachedDecoder(model)
    g = torch.Generator().manual_seed(12)
    src = mixed_batch([6, 3, 8], seed=12)
    with torch.no_grad():
        enc, plain_enc = decoder.encode(src), model.encode(src)
        sentences = torch.arange(3)  # original sentence of each active group
        history = torch.full((3 * beams, 1), BOS)
        cache = decoder.new_cache(capacity=3)  # too small on purpose: the buffers must grow
        for step in range(steps):
            rows_sentence = sentences.repeat_interleave(beams)
            got = decoder.decode_step(history[:, -1:], enc.index_select(sentences), cache, offset=step)
            torch.testing.assert_close(
                got,
                reference_step(model, history, plain_enc, rows_sentence),
                atol=1e-5,
                rtol=0,
                msg=lambda m, step=step: f"{label} step {step}: {m}",
            )
            parents = torch.randint(0, beams, (sentences.numel(), beams), generator=g)
            keep = torch.tensor([0, 2]) if step == 4 else torch.arange(sentences.numel())
            index = (keep[:, None] * beams + parents[keep]).view(-1)
            decoder.reorder_cache(cache, index, keep if keep.numel() < sentences.numel() else None)
            sentences = sentences[keep]
            new_tokens = torch.randint(4, VOCAB, (index.numel(), 1), generator=g)
            history = torch.cat([history.index_select(0, index), new_tokens], dim=1)
    return decoder, cache, enc, sentences, history


def free_ports(count: int = 1) -> list[int]:
    """`count` different ports free on loopback now (held together while picked)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def stop_process(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rewrite_test_output(path: Path, text: str) -> None:
    """Write a test output file as if test.py had written it so (another test set, another concat
    order): its record in the test folder's scores.json (rows, sha256) follows."""
    from utils.stored_files import content_record

    path.write_text(text)
    folder = next(f for f in path.parents if (f / "scores.json").is_file())
    scores = json.loads((folder / "scores.json").read_text())
    scores["files"][path.relative_to(folder).as_posix()] = content_record(path.read_bytes())
    (folder / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")


def small_config(tmp_path: Path) -> Path:
    """A small valid config file (defaults are the report's model; these keys make it tiny)."""
    path = tmp_path / "small.yaml"
    path.write_text("model: {d_model: 32, num_heads: 4}\n", encoding="utf-8")
    return path


def config_error(path: Path, overrides: list[str]) -> str:
    """The ConfigError load_config raises for `path` with `overrides`, as text."""
    from settings.config import load_config
    from utils.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


def finding_row(diffs: list[float], v_shared: float = 0.0005, v_int: float = 0.01, config: str = "a"):
    """A findings row (study/records.ComparisonRow) of the test table of per-seed differences `diffs`,
    its seed-level test from the test set's shared and per-seed noise, as the bootstrap would have split them."""
    from study.records import ComparisonRow, RowTest, SeedDifference
    from study.stats.seed_test import seed_test
    from study.terms import RowKey, WholeTestSet

    n = len(diffs)
    test = seed_test(diffs, v_shared + v_int / n, [v_shared + v_int] * n)
    return ComparisonRow(
        key=RowKey("test", config, WholeTestSet()),
        seeds=tuple(range(n)),
        num_sentences=100,
        per_seed=tuple(SeedDifference(i, float(d), None) for i, d in enumerate(diffs)),
        tested=RowTest(float(sum(diffs) / n), test),
    )


NLL_INPUTS = [(k, i) for k in (1, 2, 4) for i in range(20)]  # (k, input) of nll_beyond_run's test outputs


def nll_beyond_run(root: Path, name: str, seed: int, better: float, rng, length: int = 21):
    """A run record whose test/teacher_forced_beyond.tsv (written under root/<name>_seed<seed>/) has a
    teacher-forced NLL beyond training `better` nats below 4 per token on each of NLL_INPUTS, with
    noise from `rng` (a random.Random), trained on `length` tokens."""
    from study.records import RunRecord, RunTeacherForced, frozen_map

    folder = root / f"{name}_seed{seed}" / "test"
    folder.mkdir(parents=True)
    lines = ["k\tinput\ttokens\tnll_no_eos_sum"]
    for k, i in NLL_INPUTS:
        tokens = rng.randint(1, 9)
        lines.append(f"{k}\t{i}\t{tokens}\t{tokens * (4.0 - better + rng.uniform(-0.2, 0.2)):.6f}")
    (folder / "teacher_forced_beyond.tsv").write_text("\n".join(lines) + "\n")
    return RunRecord(
        run=str(folder.parent), seed=seed, teacher_forced=RunTeacherForced(length, (), None, (), frozen_map({}))
    )


def validations_by_command(monkeypatch) -> dict[str, int]:
    """A counter of whole-config validations (settings.config.from_raw, which load_config and only it
    calls), by whose they are: test.py's (`run_test`: the checkpoint's config, with the test-time
    overrides), compare.py's (the run folders' config.yaml it summarises), a sweep job's look at an
    existing run folder (`triage`), else the sweep's own."""
    import traceback
    from collections import Counter

    import settings.config

    counted: Counter = Counter()
    real = settings.config.from_raw
    owners = {"run_test": "test.py", "compare": "compare.py", "triage": "run folder"}

    def from_raw(raw):
        names = [frame.name for frame in traceback.extract_stack()]
        counted[next((owners[n] for n in names if n in owners), "sweep")] += 1
        return real(raw)

    monkeypatch.setattr(settings.config, "from_raw", from_raw)
    return counted


ACROSS_SIDES = {"src": "0" * 64, "ref": "1" * 64}


def across_family(claim: str = "across"):
    """A family declaring the own split and a file pair `news`, its test-set entry claiming `claim`."""
    from study.read.family import Family
    from study.stats.rules import CURRENT

    return Family(
        headline=[{"table": "test", "compared_on": "test set", "claim": claim}],
        rule=CURRENT.name,
        test_sets=[{"name": "own"}, {"name": "news", "src": "n.fr", "ref": "n.en", "sha256": ACROSS_SIDES}],
    )


AHEAD = [2.0, 2.2, 1.9, 2.1, 2.05, 1.95]  # per-seed differences far beyond the tie margin, each way
BEHIND = [-x for x in AHEAD]


def across_findings(claim: str = "across", news_tested: bool = True):
    """The findings report of `a` ahead on the own split and behind on `news` (per set: its own row alone;
    `news_tested` False: no row on `news`)."""
    from dataclasses import replace

    from study.judge.report import findings_report
    from study.judge.verdicts import word_tables
    from study.records import FindingsTable
    from study.terms import RowKey, Table, WholeTestSet

    own = finding_row(AHEAD, v_shared=0.001)
    news = replace(finding_row(BEHIND, v_shared=0.001), key=RowKey(Table.TEST, "a", WholeTestSet("news")))
    test = FindingsTable("test", "test set", "sacreBLEU", (own, news) if news_tested else (own,))
    tables, size, missing, plan = word_tables([test], across_family(claim))
    return findings_report("b", across_family(claim).at("family.yaml"), size, missing, 100, 1, tables, plan)
