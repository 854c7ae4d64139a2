"""A run's CTranslate2 conversion and CTranslate2 exports (artifacts/ctranslate2_conversion.py): a run
converts once into its folder and again when its settings change, is tested and compared through
it; an export refuses what it cannot do and a damaged one is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import one_error_line
from in_process import run_in_process as run


def test_a_run_converts_once_into_its_folder_and_again_when_its_settings_change(trained_run: Path, tmp_path):
    """decoding.backend ctranslate2 on a run converts its best checkpoint into <run>/ctranslate2/
    (a harness folder), reuses it, converts again for other baked-in settings (RoPE's scaling)."""
    import os
    import shutil

    from artifacts.checkpoint import find_best_checkpoint
    from artifacts.loading import load_for_decoding
    from settings.config import is_written_config
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
    assert RunFolder.inspect(run_dir, is_written_config).state == "trained"  # resumable, replaceable with --overwrite


@pytest.mark.slow
def test_run_exported_tested_and_compared_through_ctranslate2(trained_run: Path, tmp_path: Path) -> None:
    """The acceptance path on the tiny trained RoPE run: export.py --format ctranslate2, test.py and
    inference.py --model_path on it (the same files and scores as the PyTorch path), test.py --run
    with decoding.backend=ctranslate2 into test_ctranslate2/, a variant row in compare.py."""
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
