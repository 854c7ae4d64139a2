"""The CTranslate2 backend: every mapped encoding exported through export.py gives the PyTorch
model's log-probabilities step by step; the searches map (greedy token for token); what cannot map
is refused in one line.

The models: the tiny trained run's tokenizer and config with each encoding swapped in, random
weights (learned bias tables drawn too), 2+2 layers, pre- and post-norm, written as a PyTorch
export and converted by `export.py --model_path <it> --format ctranslate2` (the export-of-an-export
path of the real entry point). Log-probabilities of random targets given random sources (up to 45
tokens: beyond T5's exact buckets and Shaw's clip) agree within TOLERANCE.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from helpers import give_bias_tables_a_signal, one_error_line
from in_process import run_in_process as run

TOLERANCE = 1e-4  # |log p| difference; float32 in both (measured: about 1.5e-6)
MAPPED = [
    pytest.param("sinusoidal", {}, True, id="sinusoidal"),
    pytest.param("sinusoidal", {}, False, id="sinusoidal-post-norm"),
    pytest.param("learnable", {"max_positions": 64}, True, id="learnable"),
    pytest.param("shape", {"max_shift": 7}, True, id="shape"),
    pytest.param("cape", {}, True, id="cape"),
    pytest.param("none", {}, True, id="none"),
    pytest.param("rope", {}, True, id="rope"),
    pytest.param("rope", {}, False, id="rope-post-norm"),
    pytest.param("rope", {"layout": "interleaved", "fraction": 0.5}, True, id="rope-interleaved-half"),
    pytest.param("rope", {"scaling": "linear", "scaling_factor": 3.0}, True, id="rope-linear"),
    pytest.param("rope", {"scaling": "ntk", "scaling_factor": 3.0}, True, id="rope-ntk"),
    pytest.param("t5_bias", {"num_buckets": 16, "max_distance": 20}, True, id="t5_bias"),
    pytest.param("shaw", {"clip_distance": 5}, True, id="shaw"),
    pytest.param("shaw", {"clip_distance": 5}, False, id="shaw-post-norm"),
]


@pytest.fixture(scope="module")
def trained(trained_run: Path):
    """(config, tokenizer) of the tiny trained run."""
    from artifacts.checkpoint import find_best_checkpoint
    from artifacts.loading import load_model

    loaded = load_model(find_best_checkpoint(trained_run))

    cfg, tokenizer = loaded.config, loaded.tokenizer
    return cfg, tokenizer


def pytorch_export(trained, folder: Path, name: str, options: dict, norm_first: bool, **model_keys):
    """A PyTorch export of a random-weight model with the trained run's tokenizer and `name`
    (`model_keys`: other model.* keys)."""
    from artifacts.export import write_export
    from models import build_model
    from utils.config import load_config, to_dict

    cfg, tokenizer = trained
    raw = to_dict(cfg)
    raw["data"]["max_len"] = 60
    raw["model"].update(num_encoder_layers=2, num_decoder_layers=2, norm_first=norm_first, **model_keys)
    raw["model"]["positional"] = {"name": name, **options}
    raw["decoding"]["length_penalty"] = "avg"
    cfg = load_config(raw=raw)
    torch.manual_seed(1)
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, tokenizer.pad_id).eval()
    give_bias_tables_a_signal(model, 2)
    write_export(cfg, tokenizer, model, folder, {"exported_from": "test"})
    return model


def random_pairs(vocab: int, seed: int = 3) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    sources = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in (5, 17, 40, 1)]
    targets = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in (30, 9, 45, 2)]
    return sources, targets


@pytest.mark.parametrize("name,options,norm_first", MAPPED)
def test_exported_model_gives_the_same_log_probabilities(trained, tmp_path: Path, name, options, norm_first) -> None:
    from artifacts.loading import load_for_decoding

    model = pytorch_export(trained, tmp_path / "pytorch", name, options, norm_first)
    proc = run(
        ["export.py", "--model_path", str(tmp_path / "pytorch"), "--format", "ctranslate2"]
        + ["--output", str(tmp_path / "ct2")]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "ct2").iterdir()) == [
        "README.md",
        "config.json",
        "ctranslate2",
        "tokenizer.json",
    ]
    loaded = load_for_decoding(tmp_path / "ct2")
    cfg, tokenizer, converted = loaded.config, loaded.tokenizer, loaded.decoder
    assert converted.name == "ctranslate2" and loaded.backend == "ctranslate2" and cfg.decoding.backend == "ctranslate2"
    sources, targets = random_pairs(tokenizer.tgt_vocab_size)
    eos = tokenizer.eos_id
    theirs = converted.token_log_probs(sources, [t + [eos] for t in targets], eos, cfg.decoding)
    for src, tgt, logp in zip(sources, targets, theirs):
        with torch.no_grad():
            logits = model(torch.tensor([src]), torch.tensor([[tokenizer.bos_id, *tgt]]))[0]  # [T, vocab]
        ours = logits.log_softmax(-1)[torch.arange(len(tgt) + 1), torch.tensor([*tgt, eos])]
        assert len(logp) == len(tgt) + 1
        assert (ours - torch.tensor(logp)).abs().max().item() < TOLERANCE, (name, options)


@pytest.mark.parametrize("name,options", [("rope", {}), ("t5_bias", {}), ("learnable", {"max_positions": 64})])
def test_greedy_search_gives_the_same_tokens(trained, tmp_path: Path, name, options) -> None:
    """Random weights never stop by themselves: every hypothesis runs to its limit (a * len + b), the
    limit mapping is exercised on every sentence; min_len and no_repeat_ngram on some."""
    import dataclasses

    from artifacts.loading import load_for_decoding
    from decoding.backend import HarnessDecoder

    model = pytorch_export(trained, tmp_path / "pytorch", name, options, True)
    loaded = load_for_decoding(tmp_path / "pytorch", ["decoding.backend=ctranslate2"])
    cfg, tokenizer, converted = loaded.config, loaded.tokenizer, loaded.decoder
    sources, _ = random_pairs(tokenizer.tgt_vocab_size, seed=5)
    for changes in ({}, {"min_len": 4, "max_len_a": 0.5, "max_len_b": 2}, {"no_repeat_ngram": 2}):
        settings = dataclasses.replace(cfg.decoding, strategy="greedy", **changes)
        ours = HarnessDecoder(model).search(sources, tokenizer, settings, "cpu")
        theirs = converted.search(sources, tokenizer, settings, "cpu")
        assert [h[0].tokens for h in ours] == [h[0].tokens for h in theirs], changes
        assert all(len(h[0].tokens) > 0 for h in theirs)


def test_a_run_converts_once_into_its_folder_and_again_when_its_settings_change(trained_run: Path, tmp_path):
    """decoding.backend ctranslate2 on a run converts its best checkpoint into <run>/ctranslate2/
    (a harness folder), reuses it, converts again for other baked-in settings (RoPE's scaling)."""
    import os
    import shutil

    from artifacts.checkpoint import find_best_checkpoint
    from artifacts.loading import load_for_decoding
    from utils.run_folder import RunFolder, users_files_inside

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)

    ckpt = find_best_checkpoint(run_dir)
    sets = ["decoding.backend=ctranslate2", "decoding.length_penalty=avg"]
    load_for_decoding(ckpt, sets)
    model_bin = run_dir / "ctranslate2" / "ctranslate2" / "model.bin"
    first = model_bin.stat().st_mtime_ns
    load_for_decoding(ckpt, sets)
    assert model_bin.stat().st_mtime_ns == first  # reused
    load_for_decoding(ckpt, [*sets, "model.positional.scaling=ntk"])
    second = model_bin.stat().st_mtime_ns
    assert second != first  # converted again: the base is baked in
    # another checkpoint under the same name and time (a copy with cp -p): its content tells
    stat = ckpt.stat()
    other = next(p for p in ckpt.parent.glob("*.pt") if p != ckpt and p.stat().st_size == stat.st_size)
    shutil.copyfile(other, ckpt)
    os.utime(ckpt, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    load_for_decoding(ckpt, [*sets, "model.positional.scaling=ntk"])
    assert model_bin.stat().st_mtime_ns != second
    assert users_files_inside(run_dir) == ()  # all of it the harness's own (train.py --overwrite may clear it)
    assert RunFolder.inspect(run_dir).state == "trained"  # resumable, replaceable with --overwrite


@pytest.mark.parametrize(
    "name,options,sets,says",
    [
        ("alibi", {}, [], "alibi cannot be exported to CTranslate2"),
        ("kerple", {}, [], "kerple cannot be exported"),
        ("xpos", {}, [], "xpos cannot be exported"),
        ("fire", {}, [], "fire cannot be exported"),
        ("rope", {}, ["model.positional.scaling=yarn"], "no YaRN scaling"),
        ("rope", {"cross_attention": True}, [], "no positional term in cross-attention"),
        ("sinusoidal", {"randomized": True, "max_position": 256}, [], "randomized positions"),
    ],
)
def test_what_cannot_map_is_refused_in_one_line(trained, tmp_path: Path, name, options, sets, says) -> None:
    pytorch_export(trained, tmp_path / "pytorch", name, options, True)
    if "yarn" in str(sets):  # yarn needs a recorded training length
        _record_training_length(tmp_path / "pytorch")
    args = ["export.py", "--model_path", str(tmp_path / "pytorch"), "--format", "ctranslate2"]
    proc = run([*args, "--output", str(tmp_path / "ct2"), *[x for s in sets for x in ("--set", s)]])
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = one_error_line(proc)
    assert says in line and "CTranslate2 runs sinusoidal, learnable, shape, cape, none, rope, t5_bias, shaw" in line
    assert not (tmp_path / "ct2").exists()


def _record_training_length(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    for key in weights:
        if key.endswith("training_length"):
            weights[key] = torch.tensor(20)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pe-harness-export"})
    config = json.loads((folder / "config.json").read_text())  # recorded as export.py records its files
    config["files"]["model.safetensors"] = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    (folder / "config.json").write_text(json.dumps(config, indent=2))


def test_min_len_holds_back_the_first_eos_alike(trained, tmp_path: Path) -> None:
    """A model that always prefers EOS (the final norm's output made constant, EOS's output row
    along it): both searches stop at min_len exactly (EOS counted), or at the limit when it is shorter."""
    import dataclasses

    from artifacts.export import write_export
    from artifacts.loading import load_for_decoding, load_model
    from decoding.backend import HarnessDecoder

    model = pytorch_export(trained, tmp_path / "pytorch", "sinusoidal", {}, True)
    loaded = load_model(tmp_path / "pytorch")
    cfg, tokenizer = loaded.config, loaded.tokenizer
    with torch.no_grad():
        model.decoder_norm.weight.zero_()  # every step's output is the norm's bias...
        model.decoder_norm.bias.normal_(generator=torch.Generator().manual_seed(0))
        model.output_proj.weight[tokenizer.eos_id] = model.decoder_norm.bias * 100  # ...along which EOS wins
    write_export(cfg, tokenizer, model, tmp_path / "stops", {"exported_from": "test"})
    loaded = load_for_decoding(tmp_path / "stops", ["decoding.backend=ctranslate2"])
    cfg, tokenizer, converted = loaded.config, loaded.tokenizer, loaded.decoder
    sources, _ = random_pairs(tokenizer.tgt_vocab_size, seed=7)
    for min_len in (0, 1, 4, 40):
        settings = dataclasses.replace(cfg.decoding, strategy="greedy", min_len=min_len, max_len_a=0.0, max_len_b=9)
        ours = [h[0].tokens for h in HarnessDecoder(model).search(sources, tokenizer, settings, "cpu")]
        theirs = [h[0].tokens for h in converted.search(sources, tokenizer, settings, "cpu")]
        assert ours == theirs and {len(t) for t in ours} == {min(max(min_len - 1, 0), 8)}, min_len


def test_run_exported_tested_and_compared_through_ctranslate2(trained_run: Path, tmp_path: Path) -> None:
    """The acceptance path on the tiny trained RoPE run: export.py --format ctranslate2, test.py and
    inference.py --model_path on it (the same files and scores as the PyTorch path), test.py --run
    with decoding.backend=ctranslate2 into test_ctranslate2/, a variant row in compare.py."""
    import json
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    export = tmp_path / "ct2"
    assert run(["export.py", "--run", str(run_dir), "--format", "ctranslate2", "--output", str(export)]).returncode == 0
    config = json.loads((export / "config.json").read_text())["config"]
    assert config["decoding"]["length_penalty"] == "avg"  # the run's wu has no CTranslate2 form (a note says so)
    avg = ["--set", "decoding.length_penalty=avg"]
    scored = run(["test.py", "--model_path", str(export), "--output", str(tmp_path / "scores"), *avg])
    assert scored.returncode == 0, scored.stderr[-2000:]
    pytorch = run(["test.py", "--run", str(run_dir), *avg])
    assert pytorch.returncode == 0, pytorch.stderr[-2000:]
    ours, theirs = run_dir / "test", tmp_path / "scores"
    from utils.run_folder import TEACHER_FORCED_BEYOND, TEACHER_FORCED_PAIRS

    eos_sums = (TEACHER_FORCED_BEYOND, TEACHER_FORCED_PAIRS)  # EOS-renormalised sums only: not written
    assert sorted(p.name for p in theirs.iterdir() if p.name != ".lock") == sorted(
        p.name for p in ours.iterdir() if p.name not in eos_sums
    )
    scores, reference = (json.loads((d / "scores.json").read_text()) for d in (theirs, ours))
    assert scores["sacrebleu_signature"] == reference["sacrebleu_signature"]
    assert [r["k"] for r in scores["concat"]] == [r["k"] for r in reference["concat"]]
    tf = scores["teacher_forced"]
    k1 = tf["k"]["1"]["within_training"]
    assert "ctranslate2" in tf["unavailable"] and k1["nll_no_eos"] is None and k1["accuracy"] is None
    assert abs(k1["nll"] - reference["teacher_forced"]["k"]["1"]["within_training"]["nll"]) < 1e-3
    translated = run(["inference.py", "--model_path", str(export), "--src_text", "Bonjour !", "", *avg])
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 2, translated.stderr[-1500:]
    # a run tested through CTranslate2: its own variant folder, a row of its own in compare.py
    variant = run(["test.py", "--run", str(run_dir), "--set", "decoding.backend=ctranslate2", *avg])
    assert variant.returncode == 0, variant.stderr[-2000:]
    assert (run_dir / "test_ctranslate2" / "hypotheses.txt").read_text() == (theirs / "hypotheses.txt").read_text()
    compared = run(["compare.py", str(run_dir), "--output", str(tmp_path / "summary")])
    assert compared.returncode == 0, compared.stderr[-2000:]
    report = json.loads((tmp_path / "summary.json").read_text())
    labels = [g["label"] for g in report["groups"]]
    assert labels == ["demo/rope", "demo/rope [backend=ctranslate2, length_penalty=avg]"], labels
    variant_row = next(line for line in (tmp_path / "summary.md").read_text().splitlines() if "backend=" in line)
    assert "| – |" in variant_row  # the EOS-renormalised NLL beyond training: unavailable, left empty


def test_a_ctranslate2_export_refuses_what_it_cannot_do(trained_run: Path, tmp_path: Path) -> None:
    """A decoding setting CTranslate2 has no form of, a baked-in key, a command that needs the
    weights, a CTranslate2 key with the PyTorch backend: one line each (exit 2)."""
    run_dir, export = trained_run, tmp_path / "ct2"
    assert run(["export.py", "--run", str(run_dir), "--format", "ctranslate2", "--output", str(export)]).returncode == 0
    translate = ["inference.py", "--model_path", str(export), "--src_text", "Bonjour"]  # (the export: avg)
    for args, says in (
        ([*translate, "--length_penalty", "wu"], "length_penalty=avg"),
        ([*translate, "--no_repeat_ngram", "2"], "no_repeat_ngram"),
        (["inference.py", "--run", str(run_dir), "--src_text", "Bonjour", "--compute_type", "int8"], "CTranslate2's"),
        ([*translate, "--set", "model.positional.scaling=ntk"], "export it again"),
        (
            ["visualize.py", "pe-heatmap", "--model_path", str(export), "--output", str(tmp_path / "p.png")],
            "no PyTorch weights",
        ),
        (["export.py", "--model_path", str(export), "--output", str(tmp_path / "again")], "no PyTorch weights"),
        ([*translate, "--min_len", "3"], "min_len"),
    ):
        proc = run(args)
        assert proc.returncode == 2 and says in one_error_line(proc), (args, proc.stderr[-1500:])


def test_a_damaged_ctranslate2_export_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    export = tmp_path / "ct2"
    exported = run(["export.py", "--run", str(trained_run), "--format", "ctranslate2", "--output", str(export)])
    assert exported.returncode == 0, exported.stderr[-2000:]
    model_bin = export / "ctranslate2" / "model.bin"
    model_bin.write_bytes(model_bin.read_bytes()[:1000])  # a cut copy
    args = ["inference.py", "--model_path", str(export), "--src_text", "Bonjour", "--length_penalty", "avg"]
    message = one_error_line(run(args))  # (config.json's record of its sha256 names it before CTranslate2 reads it)
    assert f"{model_bin} is not the file this export was written with" in message, message
    model_bin.unlink()
    assert f"{model_bin} is missing" in one_error_line(run(args))


def test_beam_scores_are_the_harness_scores(trained, tmp_path: Path) -> None:
    """Beam search through CTranslate2 gives the harness's best hypothesis with its scores (avg:
    per token, EOS counted; none: the sum) wherever no hypothesis met the length limit (there the
    harness forces and scores EOS, CTranslate2 stops: docs/CTRANSLATE2.md). The model:
    EOS as likely as the token the model repeats most, pad and BOS as unlikely as once trained
    (CTranslate2 renormalises over the tokens it allows, the harness bans them after the softmax)."""
    import dataclasses

    from artifacts.export import write_export
    from artifacts.loading import load_for_decoding, load_model
    from decoding.backend import HarnessDecoder

    model = pytorch_export(trained, tmp_path / "pytorch", "sinusoidal", {}, True, tie_output=False)
    loaded = load_model(tmp_path / "pytorch")
    cfg, tokenizer = loaded.config, loaded.tokenizer
    g = torch.Generator().manual_seed(11)
    sources = [torch.randint(4, tokenizer.src_vocab_size, (n,), generator=g).tolist() for n in range(2, 26, 2)]
    greedy = dataclasses.replace(cfg.decoding, strategy="greedy")
    emitted = [t for h in HarnessDecoder(model).search(sources, tokenizer, greedy, "cpu") for t in h[0].tokens]
    dominant = max(set(emitted), key=emitted.count)
    with torch.no_grad():
        weight = model.output_proj.weight
        weight[tokenizer.eos_id] = weight[dominant]
        for banned in (tokenizer.pad_id, tokenizer.bos_id):
            weight[banned] = weight[dominant] * -50
    write_export(cfg, tokenizer, model, tmp_path / "stops", {"exported_from": "test"})
    loaded = load_for_decoding(tmp_path / "stops", ["decoding.backend=ctranslate2"])
    cfg, tokenizer, converted = loaded.config, loaded.tokenizer, loaded.decoder
    for penalty in ("avg", "none"):  # (min_len with beam search is refused: CTranslate2 renormalises without EOS)
        settings = dataclasses.replace(cfg.decoding, beam_size=4, nbest=3, length_penalty=penalty, max_len_b=30)
        ours = HarnessDecoder(model).search(sources, tokenizer, settings, "cpu")
        theirs = converted.search(sources, tokenizer, settings, "cpu")
        limits = [len(s) * settings.max_len_a + settings.max_len_b for s in sources]
        clear = [i for i, (a, b) in enumerate(zip(ours, theirs)) if all(len(h.tokens) + 1 < limits[i] for h in a + b)]
        assert len(clear) >= 3, (penalty, len(clear))  # sentences no hypothesis of which met the limit
        # The best hypotheses: the searches stop a sentence by different rules (the harness once it
        # has `beam` finished hypotheses, CTranslate2 by its own patience), so on a random model
        # some differ (on trained models 0.1% of the test lines: README); the n-best below differ more.
        same = [i for i in clear if ours[i][0].tokens == theirs[i][0].tokens]
        assert len(same) >= 3 and len(same) >= 0.75 * len(clear), (penalty, len(same), len(clear))
        for i in same:
            x, y = ours[i][0], theirs[i][0]
            # 1e-3 per token: what pad and BOS still weigh (renormalised away by CTranslate2 only)
            assert abs(x.score - y.score) < 1e-3 * (len(x.tokens) + 1), (penalty, i)
            length = len(x.tokens) + 1 if penalty == "none" else 1
            assert abs(x.normalized_score - y.normalized_score) < 1e-3 * length, (penalty, i)


def test_the_equality_benchmark_runs(trained_run: Path, tmp_path: Path) -> None:
    """benchmarks/ctranslate2_equality.py on the tiny run: one row with every figure."""
    import json
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import ctranslate2_equality

    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    assert ctranslate2_equality.main([str(run_dir), "--output", str(tmp_path / "eq.json")]) == 0
    (row,) = json.loads((tmp_path / "eq.json").read_text())["runs"]
    assert row["lines"] == 10 and row["ct2_greedy_float32_identical"] == 1.0  # greedy: token for token
    assert {f"{way}_sacrebleu" for way in ctranslate2_equality.WAYS} <= set(row)


def test_teacher_forcing_reaches_the_end_of_a_position_table(trained, tmp_path: Path) -> None:
    """A reference longer than a learnable table (64 rows) is cut as the PyTorch path cuts it, one
    token shorter (score_batch appends EOS itself), and scored: plain NLL, the rest null."""
    from artifacts.loading import load_for_decoding
    from evaluation.teacher_forced import teacher_forced_scores

    pytorch_export(trained, tmp_path / "pytorch", "learnable", {"max_positions": 64}, True)
    loaded = load_for_decoding(tmp_path / "pytorch", ["decoding.backend=ctranslate2"])
    cfg, tokenizer, converted = loaded.config, loaded.tokenizer, loaded.decoder
    pairs = [("le chat dort. " * 30, "the cat sleeps. " * 30), ("Bonjour !", "Hello!")]
    assert len(tokenizer.encode_tgt(pairs[0][1])) > 64
    report, beyond, per_pair = teacher_forced_scores(converted, tokenizer, pairs, None, cfg, "cpu", concat=[2])
    assert beyond is None and per_pair is None and "score_batch" in report["unavailable"]
    one = report["k"]["1"]
    assert one["truncated_targets"] == 1 and one["target_tokens"] == 63 + len(tokenizer.encode_tgt("Hello!")) + 1
    assert all(b["nll"] is not None and b["nll_no_eos"] is None for b in one["buckets"])


def test_the_model_card_is_formatted(trained_run: Path, tmp_path: Path) -> None:
    """The card's code is as ruff formats it: an export inside a project passes its `make lint`."""
    import subprocess
    import sys

    export = tmp_path / "ct2"
    assert (
        run(["export.py", "--run", str(trained_run), "--format", "ctranslate2", "--output", str(export)]).returncode
        == 0
    )
    card = export / "README.md"
    assert "import ctranslate2" in card.read_text()
    ruff = [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", str(card)]
    assert subprocess.run(ruff, capture_output=True, text=True).returncode == 0
