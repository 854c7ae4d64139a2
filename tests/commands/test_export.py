"""export.py: a self-contained, pickle-free folder that translates exactly like its checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import one_error_line
from in_process import run_in_process as run

SENTENCES = ["Bonjour !", "Je ne sais pas ce que tu veux dire.", "Où est la gare ?", ""]


@pytest.mark.slow
def test_export_round_trip_translates_identically(trained_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    tested = run(["test.py", "--run", str(run_dir)])
    assert tested.returncode == 0, tested.stderr[-2000:]
    out = tmp_path / "exported"
    proc = run(["export.py", "--run", str(run_dir), "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors", "tokenizer.json"]
    # no pickle: safetensors header + JSON; the weights are exactly the checkpoint's
    from safetensors import safe_open

    from artifacts.checkpoint import find_best_checkpoint
    from artifacts.loading import load_model

    ckpt = find_best_checkpoint(run_dir)
    model = load_model(ckpt).model
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        stored = {name: f.get_tensor(name) for name in f.keys()}
    state = model.state_dict()
    assert stored and all(name in state and state[name].equal(t) for name, t in stored.items())
    config = json.loads((out / "config.json").read_text())
    assert config["format"] == "pe-harness-export" and config["config"]["model"]["positional"]["name"] == "rope"
    # the model card quotes the run's test scores and their signature
    scores = json.loads((run_dir / "test" / "scores.json").read_text())
    card = (out / "README.md").read_text()
    assert f"sacreBLEU **{scores['sacrebleu']:.2f}**" in card and scores["sacrebleu_signature"] in card
    # translations: the export equals the checkpoint, greedy and beam with n-best scores
    for flags in (["--strategy", "greedy"], ["--nbest", "2"]):
        from_ckpt = run(["inference.py", "--model_path", str(ckpt), "--src_text", *SENTENCES, *flags])
        from_export = run(["inference.py", "--model_path", str(out), "--src_text", *SENTENCES, *flags])
        assert from_export.returncode == 0, from_export.stderr[-2000:]
        assert from_export.stdout == from_ckpt.stdout and from_ckpt.stdout.strip()
    # test.py scores the export like the run
    scored = run(["test.py", "--model_path", str(out), "--output", str(tmp_path / "scores")])
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert (tmp_path / "scores" / "hypotheses.txt").read_text() == (run_dir / "test" / "hypotheses.txt").read_text()
    assert json.loads((tmp_path / "scores" / "scores.json").read_text())["sacrebleu"] == scores["sacrebleu"]


def test_loading_an_export_never_unpickles(trained_run: Path, tmp_path: Path, monkeypatch) -> None:
    import pickle

    import torch

    from artifacts.loading import load_model
    from decoding.backend import HarnessDecoder
    from evaluation.translate import translate

    out = tmp_path / "exported"
    assert run(["export.py", "--run", str(trained_run), "--output", str(out)]).returncode == 0

    def refuse(*args, **kwargs):
        raise AssertionError("an export must load without pickle")

    for module, name in ((torch, "load"), (pickle, "load"), (pickle, "loads")):
        monkeypatch.setattr(module, name, refuse)
    loaded = load_model(out)
    cfg, tokenizer, model = loaded.config, loaded.tokenizer, loaded.model
    assert translate(HarnessDecoder(model), tokenizer, SENTENCES[:2], cfg.decoding)[0].text
    with pytest.raises(Exception, match="without pickle"):  # the guard does catch a checkpoint's torch.load
        load_model(next((trained_run / "checkpoints").glob("*.pt")))


def test_export_replaces_only_its_own_export_and_only_with_overwrite(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    for overwrite in ([], ["--overwrite"]):  # a folder of the user's: never, --overwrite or not
        message = one_error_line(run(["export.py", "--run", str(trained_run), "--output", str(out), *overwrite]))
        assert "--output" in message and str(out) in message
        assert [p.name for p in out.iterdir()] == ["notes.txt"]
    export = tmp_path / "export"
    assert run(["export.py", "--run", str(trained_run), "--output", str(export)]).returncode == 0
    before = {p.name: p.read_bytes() for p in export.iterdir() if p.is_file()}  # (byte-reproducible)
    again = run(["export.py", "--run", str(trained_run), "--output", str(export)])  # the same export: done
    assert again.returncode == 0 and "already holds this export" in again.stdout, again.stdout + again.stderr
    other = ["export.py", "--run", str(trained_run), "--output", str(export), "--set", "decoding.beam_size=3"]
    assert "pass --overwrite" in one_error_line(run(other))  # another export over it: only with --overwrite
    (export / "README.md").write_text("an old card")  # what export.py wrote before: replaced with --overwrite
    proc = run(["export.py", "--run", str(trained_run), "--output", str(export), "--overwrite"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = {p.name: p.read_bytes() for p in export.iterdir() if p.is_file()}
    assert after == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing left aside
    # a run whose scores came from another checkpoint: exported without them, saying so
    last = next((trained_run / "checkpoints").glob("last_*.pt"))
    proc = run(["export.py", "--model_path", str(last), "--output", str(tmp_path / "last")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "No test scores" in (tmp_path / "last" / "README.md").read_text()


def test_an_export_names_a_file_that_is_not_the_one_it_was_written_with(trained_run: Path, tmp_path: Path) -> None:
    """config.json records each file's sha256 (weights, tokenizer, CTranslate2 model and vocabularies):
    another run's tokenizer.json swapped in, or a damaged vocabulary, is one line naming the file."""
    out = tmp_path / "exp"
    assert run(["export.py", "--run", str(trained_run), "--output", str(out)]).returncode == 0
    recorded = json.loads((out / "config.json").read_text())["files"]
    assert {"model.safetensors", "tokenizer.json"} <= set(recorded)
    with open(out / "tokenizer.json", "a") as f:  # still the same tokenizer to read, but not the same file
        f.write("\n")
    proc = run(["inference.py", "--model_path", str(out), "--src_text", "bonjour"])
    message = one_error_line(proc)
    assert f"{out / 'tokenizer.json'} is not the file this export was written with" in message, message
    assert "re-export it" in message

    ct2 = tmp_path / "ct2"
    assert (
        run(["export.py", "--run", str(trained_run), "--output", str(ct2), "--format", "ctranslate2"]).returncode == 0
    )
    vocabularies = sorted(ct2.glob("ctranslate2/*vocabulary*"))
    assert vocabularies and all(
        str(v.relative_to(ct2)) in json.loads((ct2 / "config.json").read_text())["files"] for v in vocabularies
    )
    vocabularies[0].write_text(vocabularies[0].read_text()[:-20])  # cut short
    message = one_error_line(run(["inference.py", "--model_path", str(ct2), "--src_text", "bonjour"]))
    assert f"{vocabularies[0]} is not the file this export was written with" in message, message


def test_a_runs_conversion_with_a_damaged_file_is_converted_again(trained_run: Path, tmp_path: Path) -> None:
    """decoding.backend ctranslate2 converts the run's checkpoint once into <run>/ctranslate2/; a
    conversion whose files changed since is converted again, not decoded with."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    args = ["inference.py", "--run", str(run_dir), "--src_text", "bonjour", "--set", "decoding.backend=ctranslate2"]
    args += ["--set", "decoding.length_penalty=avg"]
    first = run(args)
    assert first.returncode == 0, first.stderr[-2000:]
    vocabulary = sorted((run_dir / "ctranslate2" / "ctranslate2").glob("*vocabulary*"))[0]
    vocabulary.write_text("[]")
    again = run(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "converting again" in again.stdout
    assert again.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]  # the same translation
    assert vocabulary.read_text() != "[]"


def test_an_export_with_an_edited_config_json_is_refused_naming_it(trained_run: Path, tmp_path: Path) -> None:
    """Issue 75: config.json was not in the export's records: `positional: {name: none}` written into it
    loaded and translated with another model, exit 0. Its content is recorded now (config_sha256): an
    edit is one line naming the file and the export.py command; an export written before the record
    reads by the earlier rule (its other files checked)."""
    out = tmp_path / "exp"
    assert run(["export.py", "--run", str(trained_run), "--output", str(out)]).returncode == 0
    written = json.loads((out / "config.json").read_text())
    edited = json.loads(json.dumps(written))
    edited["config"]["model"]["positional"] = {"name": "none"}
    (out / "config.json").write_text(json.dumps(edited, indent=2) + "\n")
    message = one_error_line(run(["inference.py", "--model_path", str(out), "--src_text", "bonjour"]))
    assert f"{out / 'config.json'} is not the config.json this export was written with" in message, message
    assert f"python export.py --model_path <the folder holding that run>/{written['exported_from']}" in message
    older = {key: value for key, value in written.items() if key != "config_sha256"}
    (out / "config.json").write_text(json.dumps(older, indent=2) + "\n")
    proc = run(["inference.py", "--model_path", str(out), "--src_text", "bonjour"])
    assert proc.returncode == 0, proc.stderr[-2000:]
