"""export.py loses nothing: an export is shareable (its modes follow the umask, its
card is true of the run and holds no path of this machine, says how to load it), and every misuse
(two models named, links, a foreign folder, a full disk, a --run that is no run) is one line."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import one_error_line
from in_process import run_in_process as run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def greedy_run(trained_run: Path, tmp_path_factory) -> Path:
    """A copy of the tiny run, scored by test.py with greedy search (its config says beam 2)."""
    run_dir = tmp_path_factory.mktemp("r3export") / "greedy"
    shutil.copytree(trained_run, run_dir)
    proc = run(["test.py", "--run", str(run_dir), "--set", "decoding.strategy=greedy", "--concat", "1"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def exported(greedy_run: Path) -> Path:
    out = greedy_run.parent / "exported"
    proc = run(["export.py", "--run", str(greedy_run), "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.mark.parametrize("umask, folder_mode, file_mode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_an_export_is_as_readable_as_any_file_of_the_user(
    greedy_run: Path, tmp_path: Path, umask: int, folder_mode: int, file_mode: int
) -> None:
    previous = os.umask(umask)
    try:
        proc = run(["export.py", "--run", str(greedy_run), "--output", str(tmp_path / "shared")])
    finally:
        os.umask(previous)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "shared").stat().st_mode & 0o777 == folder_mode
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "shared").iterdir()}
    assert modes == {name: file_mode for name in ("README.md", "config.json", "model.safetensors", "tokenizer.json")}


def test_the_card_says_how_the_model_was_decoded_trained_scored_and_loaded(greedy_run: Path, exported: Path) -> None:
    card = (exported / "README.md").read_text()
    scores = json.loads((greedy_run / "test" / "scores.json").read_text())
    assert scores["decoding"]["strategy"] == "greedy"
    scored_line = next(line for line in card.splitlines() if line.startswith("On "))
    assert "greedy search" in scored_line and "beam" not in scored_line
    # the config's own search (inference.py's default) with its width, length penalty and alpha
    assert "inference.py's default) | beam search, beam 2, length penalty wu, alpha 0.6 |" in card
    assert f"sacreBLEU **{scores['sacrebleu']:.2f}** (`{scores['sacrebleu_signature']}`)" in card
    # the budget trained: the best checkpoint's updates (6 for the tiny run) and that the run finished
    assert "| training | 6 updates, epoch 1; the run finished after 6 updates (budget 20 epochs or 6 updates" in card
    assert "## How to load" in card and "python inference.py --model_path THIS_FOLDER" in card
    assert "needs the code of the pe-harness" in card and "commit `" in card
    for machine_path in (greedy_run, greedy_run.parent, ROOT, Path.home()):
        assert str(machine_path) not in card
    assert json.loads((exported / "config.json").read_text())["exported_from"].startswith("greedy/checkpoints/best_")


def test_a_run_that_has_not_finished_says_so(greedy_run: Path, tmp_path: Path) -> None:
    running = tmp_path / "running"
    shutil.copytree(greedy_run, running, ignore=shutil.ignore_patterns("test*"))
    log = running / "metrics.jsonl"
    log.write_text("".join(line for line in log.read_text().splitlines(True) if '"event": "end"' not in line))
    proc = run(["export.py", "--run", str(running), "--output", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "6 updates, epoch 1; the run had not finished its budget when exported" in card
    assert "No test scores" in card


def test_a_score_that_is_not_a_number_is_left_out_with_a_note(greedy_run: Path, tmp_path: Path) -> None:
    odd = tmp_path / "odd"
    shutil.copytree(greedy_run, odd)
    scores_path = odd / "test" / "scores.json"
    scores = json.loads(scores_path.read_text())
    scores_path.write_text(json.dumps({**scores, "sacrebleu": "n/a", "num_sentences": None}))
    proc = run(["export.py", "--run", str(odd), "--output", str(tmp_path / "out")])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"{scores_path}: sacrebleu is 'n/a', not a number" in proc.stdout + proc.stderr
    card = (tmp_path / "out" / "README.md").read_text()
    assert "- sacrebleu: left out (not a number in the run's scores.json)" in card
    assert f"chrF {scores['chrf']:.2f}" in card  # the other scores stay
    scores_path.write_text('{"sacrebleu": 1')  # cut short: no scores, a note naming the file
    proc = run(["export.py", "--run", str(odd), "--output", str(tmp_path / "out2")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{scores_path} cannot be read" in proc.stdout + proc.stderr
    assert "No test scores" in (tmp_path / "out2" / "README.md").read_text()


def test_run_and_model_path_together_is_one_line(greedy_run: Path, tmp_path: Path) -> None:
    last = next((greedy_run / "checkpoints").glob("last_*.pt"))
    args = ["--run", str(greedy_run), "--model_path", str(last), "--output", str(tmp_path / "out")]
    message = one_error_line(run(["export.py", *args]))
    assert "--run and --model_path both name the model to export" in message
    assert not (tmp_path / "out").exists()


def test_output_links_and_folders_that_are_not_exports(greedy_run: Path, exported: Path, tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    message = one_error_line(run(["export.py", "--run", str(greedy_run), "--output", str(dangling)]))
    assert f"--output {dangling} is a link to {tmp_path / 'nowhere'}, which does not exist" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]  # no staging folder left, none named
    # a link to a folder: the export is written where it points, the link stays
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    proc = run(["export.py", "--run", str(greedy_run), "--output", str(tmp_path / "link")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"is a link to {tmp_path / 'real'}: the export is written there" in proc.stdout + proc.stderr
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "model.safetensors").is_file()
    (tmp_path / "real" / "README.md").write_text("an old card")  # replaced through the link with --overwrite
    proc = run(["export.py", "--run", str(greedy_run), "--output", str(tmp_path / "link"), "--overwrite"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "README.md").read_text().startswith("# ")
    # a folder of the user's: one line that does not suggest --overwrite (which would not help)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    message = one_error_line(run(["export.py", "--run", str(greedy_run), "--output", str(tmp_path / "mine")]))
    assert "is a folder that is not an export of export.py alone" in message and "pass --overwrite" not in message
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()  # an empty folder (made beforehand with mkdir) is filled: nothing to lose
    assert run(["export.py", "--run", str(greedy_run), "--output", str(tmp_path / "empty")]).returncode == 0
    assert (tmp_path / "empty" / "model.safetensors").is_file()
    # another export over an earlier one without --overwrite: says --overwrite replaces it
    other = ["export.py", "--run", str(greedy_run), "--output", str(exported), "--set", "decoding.beam_size=3"]
    assert "is an earlier export: pass --overwrite" in one_error_line(run(other))


def test_a_full_disk_names_the_file_and_keeps_the_earlier_export(greedy_run: Path, tmp_path: Path, monkeypatch) -> None:
    import safetensors
    import safetensors.torch

    out = tmp_path / "exp"
    assert run(["export.py", "--run", str(greedy_run), "--output", str(out)]).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def disk_full(*args, **kwargs):  # what safetensors raises when the disk fills (seen on a tiny tmpfs)
        raise safetensors.SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", disk_full)
    message = one_error_line(run(["export.py", "--run", str(greedy_run), "--output", str(out), "--overwrite"]))
    assert message.startswith(f"error: cannot write {out / 'model.safetensors'}: ") and "No space left" in message
    assert f"the export at {out} is unchanged" in message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["exp"]  # no staging folder left behind
    monkeypatch.undo()
    write_text = Path.write_text

    def config_disk_full(self, *args, **kwargs):  # a failed write() names no file
        if self.name == "config.json" and self.parent.parent.name == ".exp.staging":  # (utils/publish.py)
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", config_disk_full)
    message = one_error_line(run(["export.py", "--run", str(greedy_run), "--output", str(out), "--overwrite"]))
    assert message.startswith(f"error: cannot write {out / 'config.json'}: No space left on device")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["exp"]


def test_a_run_that_is_no_run_is_one_line(greedy_run: Path, exported: Path, tmp_path: Path) -> None:
    def refused(model: str) -> str:
        return one_error_line(run(["export.py", "--run", model, "--output", str(tmp_path / "out")]))

    config = greedy_run / "config.yaml"
    message = refused(str(config))
    assert "is a file, not a run folder: give the run folder" in message and "--model_path" not in message
    checkpoint = next((greedy_run / "checkpoints").glob("last_*.pt"))
    assert f"a checkpoint file goes in --model_path {checkpoint}" in refused(str(checkpoint))
    assert f"is an export folder (export.py): use --model_path {exported}" in refused(str(exported))
    assert "no such run folder (a run is runs/<name>" in refused(str(tmp_path / "typo"))
    (tmp_path / "young").mkdir()  # a run still starting (or failed) before its first checkpoint
    shutil.copy(config, tmp_path / "young" / "config.yaml")
    assert "has no checkpoint yet" in refused(str(tmp_path / "young"))
    assert not (tmp_path / "out").exists()


def test_an_export_exported_again_is_the_same_model_and_card(exported: Path, tmp_path: Path) -> None:
    proc = run(["export.py", "--model_path", str(exported), "--output", str(tmp_path / "again")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, again = (json.loads((d / "config.json").read_text()) for d in (exported, tmp_path / "again"))
    assert again == first  # the source, budget and scores travel with it (one harness commit here)
    assert (tmp_path / "again" / "README.md").read_text() == (exported / "README.md").read_text()
    from artifacts.loading import load_model

    # the same weights (which of the tied tensors names them in the file is safetensors' choice)
    states = [load_model(d).model.state_dict() for d in (exported, tmp_path / "again")]
    assert states[0].keys() == states[1].keys() and all(states[0][k].equal(states[1][k]) for k in states[0])


def test_any_safetensors_error_while_writing_names_the_weights_file(
    greedy_run: Path, tmp_path: Path, monkeypatch
) -> None:
    import safetensors
    import safetensors.torch

    def refused(*args, **kwargs):  # safetensors' own writer fails, with a text the harness never saw
        raise safetensors.SafetensorError("x")

    monkeypatch.setattr(safetensors.torch, "serialize_file", refused)  # save_file runs up to the write
    out = tmp_path / "exp"
    message = one_error_line(run(["export.py", "--run", str(greedy_run), "--output", str(out)]))
    assert message.startswith(f"error: cannot write {out / 'model.safetensors'}: x"), message
    assert list(tmp_path.iterdir()) == []  # no staging folder left behind, nothing at --output


def following(hint: str, run_parent: Path) -> list[str]:
    """The export.py command a re-export hint suggests, with its placeholder for the folder that
    holds the run filled in."""
    command = hint.replace("<the folder holding that run>", str(run_parent)).split("python export.py ", 1)[1]
    return ["export.py", *command.split()]


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_the_reexport_hint_works_as_written(greedy_run: Path, exported: Path, tmp_path: Path, damage: str) -> None:
    copy = tmp_path / "export"
    shutil.copytree(exported, copy)
    weights = copy / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:100])
    else:
        weights.unlink()
    message = one_error_line(run(["inference.py", "--model_path", str(copy), "--src_text", "Bonjour !"]))
    source = json.loads((exported / "config.json").read_text())["exported_from"]
    assert f"from {source} (exported_from, relative to the folder that holds its run" in message, message
    if damage == "missing":  # not an export any more: --overwrite would be refused, so it is not suggested
        assert f"move {copy} away first" in message and "--overwrite" not in message, message
        shutil.rmtree(copy)
    else:
        assert message.endswith("--overwrite"), message
    proc = run(following(message, greedy_run.parent), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert run(["inference.py", "--model_path", str(copy), "--src_text", "Bonjour !"]).returncode == 0
