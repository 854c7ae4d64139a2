"""Nothing lost with checkpoints, exports and compared runs, each case through
the real entry point. The checkpoint's own config is the model (a checkpoint loaded through a run
folder must be that run's: artifacts/loading.py: check_checkpoint_of_run); compare.py names what it
skips and refuses a run given twice; a damaged run or export file is one line naming it; a reader
of a run that is training tolerates its checkpoint rotation and says the run is training."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from unittest import mock

import pytest
from helpers import copy_of, one_error_line, snapshot
from in_process import run_in_process as run

from utils.run_folder import RunLock


@pytest.fixture(scope="module")
def tested_run(trained_run: Path) -> Path:
    """The module's tiny RoPE run, scored once by test.py (test/scores.json, hypotheses.txt)."""
    proc = run(["test.py", "--run", str(trained_run)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return trained_run


@pytest.fixture(scope="module")
def exported(trained_run: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("r3-export") / "rope"
    proc = run(["export.py", "--run", str(trained_run), "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def sinusoidal_run(trained_run: Path, tmp_path_factory) -> Path:
    """A run whose config.yaml is sinusoidal, holding RoPE checkpoints (copied in from another run)."""
    run_dir = copy_of(trained_run, tmp_path_factory.mktemp("r3-sin") / "sinusoidal")
    config = run_dir / "config.yaml"
    text = re.sub(r"(  positional:\n)(    .*\n)+", r"\1    name: sinusoidal\n", config.read_text())
    assert "name: sinusoidal" in text
    config.write_text(text)
    return run_dir


def best_of(run_dir: Path) -> Path:
    return next((run_dir / "checkpoints").glob("best_*.pt"))


# ---- 1. the checkpoint's own config is the model


@pytest.mark.parametrize("command", ["test", "inference", "export", "average", "test_model_path"])
def test_a_checkpoint_of_another_experiment_is_refused_in_a_run(sinusoidal_run: Path, tmp_path: Path, command) -> None:
    run_flag = ["--run", str(sinusoidal_run)]
    args = {
        "test": ["test.py", *run_flag],
        "test_model_path": ["test.py", "--model_path", str(best_of(sinusoidal_run))],
        "inference": ["inference.py", *run_flag, "--src_text", "Bonjour !"],
        "export": ["export.py", *run_flag, "--output", str(tmp_path / "e")],
        "average": ["average.py", *run_flag, "--average_last", "1", "--output", str(tmp_path / "a.pt")],
    }[command]
    before = snapshot(sinusoidal_run)
    message = one_error_line(run(args))
    assert "model.positional.name: 'rope' -> 'sinusoidal'" in message, message
    assert str(sinusoidal_run / "config.yaml") in message and "checkpoints" in message, message
    assert snapshot(sinusoidal_run) == before and not (sinusoidal_run / "test").exists()
    assert not (tmp_path / "e").exists() and not (tmp_path / "a.pt").exists()


@pytest.mark.parametrize("recorded", ["model", "encoding only"])
def test_compare_reads_a_run_as_the_model_its_test_scored_not_an_edited_config(
    tested_run: Path, tmp_path: Path, recorded: str
) -> None:
    """Issue 75, case 5: config.yaml is editable, scores.json records the model test.py scored (its
    settings; a test written before they were recorded, its encoding): compare.py refuses a
    config.yaml that says another encoding or model setting, in one line naming the file and key,
    for a run with its checkpoints or archived without them."""
    run_dir = copy_of(tested_run, tmp_path / "rope")
    shutil.rmtree(run_dir / "checkpoints")  # as archived: the test's own record is what is left
    scores_path = run_dir / "test" / "scores.json"
    scores = json.loads(scores_path.read_text())
    assert scores["model"]["positional"]["name"] == "rope" and scores["model"]["d_model"] == 32
    if recorded != "model":
        del scores["model"]
        scores_path.write_text(json.dumps(scores))
    assert run(["compare.py", str(run_dir), "--no_significance"]).returncode == 0
    config = run_dir / "config.yaml"
    as_trained = config.read_text()
    edits = {"model.positional.name": re.sub(r"(  positional:\n)(    .*\n)+", r"\1    name: none\n", as_trained)}
    if recorded == "model":
        edits["model.d_model"] = as_trained.replace("d_model: 32", "d_model: 64")
    for key, text in edits.items():
        assert text != as_trained
        config.write_text(text)
        message = one_error_line(run(["compare.py", str(run_dir), "--no_significance"]))
        assert message.startswith(f"error: {config}: {key} is ") and str(scores_path) in message, message
        assert "restore config.yaml" in message, message


# ---- 2. compare.py: what it skipped, and a run given twice


def test_compare_names_each_folder_it_skips(tested_run: Path, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    proc = run(["compare.py", str(tested_run), str(tmp_path / "notes"), str(tmp_path / "typo"), "--no_significance"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"skipped {tmp_path / 'notes'} (no config.yaml" in proc.stderr, proc.stderr
    assert f"skipped {tmp_path / 'typo'} (no such folder)" in proc.stderr, proc.stderr


def test_compare_with_no_run_left_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    message = one_error_line(run(["compare.py", str(tmp_path / "notes"), str(tmp_path / "typo")]))
    assert "no run folders" in message and "typo (no such folder)" in message, message


def test_compare_refuses_a_copied_run_as_a_second_seed(tested_run: Path, tmp_path: Path) -> None:
    copy = copy_of(tested_run, tmp_path / "copy")
    shutil.rmtree(copy / "checkpoints")  # an archived copy: test outputs, no checkpoints
    message = one_error_line(run(["compare.py", str(tested_run), str(copy), "--no_significance"]))
    assert f"{tested_run} and {copy} are the same run" in message, message


# ---- 3. damaged run and export files


@pytest.mark.parametrize("value", ["n/a", None])
def test_a_score_that_is_not_a_number_is_named(tested_run: Path, tmp_path: Path, value) -> None:
    copy = copy_of(tested_run, tmp_path / "run")
    scores = json.loads((copy / "test" / "scores.json").read_text())
    (copy / "test" / "scores.json").write_text(json.dumps({**scores, "sacrebleu": value}))
    message = one_error_line(run(["compare.py", str(copy), "--no_significance"]))
    assert f"{copy / 'test' / 'scores.json'}: 'sacrebleu' is {value!r}, not a number" in message, message


def test_an_empty_checkpoint_is_named(trained_run: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    message = one_error_line(run(["test.py", "--model_path", str(empty), "--output", str(tmp_path / "o")]))
    assert f"{empty} is empty (0 bytes" in message, message


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_truncated_export_file_is_named(exported: Path, tmp_path: Path, name: str) -> None:
    copy = copy_of(exported, tmp_path / "export")
    data = (copy / name).read_bytes()
    (copy / name).write_bytes(data[: len(data) // 2])
    message = one_error_line(run(["inference.py", "--model_path", str(copy), "--src_text", "Bonjour !"]))
    assert f"{copy / name} is unreadable" in message or f"{copy / name} is not readable" in message, message
    assert "re-export it" in message, message


# ---- 5. which flag fits, a renamed averaged checkpoint, an export without its tokenizer


def test_an_export_given_as_run_says_use_model_path(exported: Path) -> None:
    message = one_error_line(run(["inference.py", "--run", str(exported), "--src_text", "Bonjour !"]))
    assert f"is an export folder (export.py): use --model_path {exported}" in message, message


def test_a_run_given_as_model_path_says_use_run(trained_run: Path) -> None:
    message = one_error_line(run(["inference.py", "--model_path", str(trained_run), "--src_text", "Bonjour !"]))
    assert f"is a run folder: use --run {trained_run}" in message, message


def test_an_export_without_its_tokenizer_is_named_never_the_hub(exported: Path, tmp_path: Path) -> None:
    copy = copy_of(exported, tmp_path / "export")
    (copy / "tokenizer.json").unlink()
    tried: list[str] = []  # any hub call or connection; recorded, since a loader may swallow what it raises

    def refused(what: str):
        def call(*args, **kwargs):
            tried.append(what)
            raise OSError(f"test: no {what}")

        return call

    # transformers holds its own references to the hub functions: patch those, and the sockets below them
    with (
        mock.patch("transformers.utils.hub.hf_hub_download", refused("hf_hub_download")),
        mock.patch("transformers.utils.hub.snapshot_download", refused("snapshot_download")),
        mock.patch("socket.socket.connect", refused("socket.connect")),
        mock.patch("socket.create_connection", refused("socket.create_connection")),
    ):
        message = one_error_line(run(["inference.py", "--model_path", str(copy), "--src_text", "Bonjour !"]))
    assert tried == [], tried
    assert message.startswith(f"error: {copy / 'tokenizer.json'} is missing: "), message


def test_a_renamed_averaged_checkpoint_does_not_stop_a_resume(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_of(trained_run, tmp_path / "run")
    assert run(["average.py", "--run", str(run_dir), "--average_last", "2"]).returncode == 0
    averaged = run_dir / "checkpoints" / "averaged_last2.pt"
    averaged.rename(run_dir / "checkpoints" / "last_checkpoint_99.pt")
    proc = run(["train.py", "--run", str(run_dir)])  # a resume, its budget already reached
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "last_checkpoint_99.pt holds no training state" in proc.stdout + proc.stderr


# ---- 6. average.py --output into another run


def test_average_into_another_runs_checkpoints_is_refused(trained_run: Path, tmp_path: Path) -> None:
    other = copy_of(trained_run, tmp_path / "other")
    before = snapshot(other)
    target = other / "checkpoints" / "averaged_last1.pt"
    message = one_error_line(
        run(["average.py", "--run", str(trained_run), "--average_last", "1", "--output", str(target)])
    )
    assert f"inside the run folder {other}" in message and "averaged are" in message, message
    assert snapshot(other) == before


# ---- 4. reading a run while it trains


def test_a_checkpoint_rotated_away_while_read_is_listed_again(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_of(trained_run, tmp_path / "run")
    from artifacts import lookup

    real, rotated = lookup.read_checkpoint, []

    def rotate_first(path: Path) -> dict:
        if not rotated:  # training wrote a better one and rotated this one away after it was listed
            newer = path.with_name(re.sub(r"_(\d+)_(.*)=.*\.pt$", r"_99_\2=999.0.pt", path.name))
            shutil.copy(path, newer)
            path.unlink()
            rotated.append(newer)
        return real(path)

    with mock.patch.object(lookup, "read_checkpoint", rotate_first):
        proc = run(["export.py", "--run", str(run_dir), "--output", str(tmp_path / "e")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    exported_from = json.loads((tmp_path / "e" / "config.json").read_text())["exported_from"]
    assert rotated and Path(exported_from).name == rotated[0].name, exported_from


def test_a_reader_says_the_run_is_still_training(trained_run: Path, tmp_path: Path) -> None:
    run_dir = copy_of(trained_run, tmp_path / "run")
    step = re.search(r"_(\d+)_", best_of(run_dir).name).group(1)
    with RunLock(run_dir, "train.py --run " + str(run_dir)):
        proc = run(["export.py", "--run", str(run_dir), "--output", str(tmp_path / "e")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"run {run_dir} is still training (PID" in proc.stderr, proc.stderr
    assert f"checkpoint of step {step}" in proc.stderr, proc.stderr


def test_a_checkpoint_rotated_away_while_listed_is_listed_again(trained_run: Path, tmp_path: Path) -> None:
    from artifacts import checkpoint

    real, calls = checkpoint.newest_key, []

    def vanished_once(path: Path):
        calls.append(path)
        if len(calls) == 1:  # the stat of a file that rotation removed after the glob listed it
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path)

    with mock.patch.object(checkpoint, "newest_key", vanished_once):
        proc = run(["export.py", "--run", str(trained_run), "--output", str(tmp_path / "e")])
    assert proc.returncode == 0 and len(calls) > 1, proc.stderr[-2000:]
