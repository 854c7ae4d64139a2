"""Reading an export back (artifacts/export_reading.py): config.json checked for format and version,
every file it records checked against its sha256, and one line naming the damaged file with the
export.py command that writes it again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from in_process import run_in_process

from artifacts.checkpoint import CheckpointError
from artifacts.export import EXPORT_FORMAT, EXPORT_VERSION
from artifacts.export_reading import check_export_files, read_export_config, reexport_hint


@pytest.fixture(scope="module")
def exported(trained_run: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "rope"
    proc = run_in_process(["export.py", "--run", str(trained_run), "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_an_export_reads_back_with_its_files_recorded(exported: Path) -> None:
    meta = read_export_config(exported)
    assert meta["format"] == EXPORT_FORMAT and meta["format_version"] == EXPORT_VERSION
    assert {"model.safetensors", "tokenizer.json"} <= set(meta["files"])
    check_export_files(exported, meta)  # every file as written


def test_a_swapped_file_is_named_with_the_command_that_writes_it_again(exported: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    (copy / "tokenizer.json").write_text("{}")
    with pytest.raises(CheckpointError) as error:
        check_export_files(copy, read_export_config(copy))
    message = str(error.value)
    assert f"{copy / 'tokenizer.json'} is not the file this export was written with" in message
    assert "python export.py --model_path" in message and f"--output {copy} --overwrite" in message


@pytest.mark.parametrize(
    "config, says",
    [
        ("{cut", "is not readable JSON"),
        (json.dumps({"format": "other", "format_version": 1}), "is not an export of this harness"),
        (json.dumps({"format": EXPORT_FORMAT, "format_version": EXPORT_VERSION + 1}), "newer than this harness"),
        (json.dumps({"format": EXPORT_FORMAT, "format_version": EXPORT_VERSION}), "holds no 'config' section"),
    ],
)
def test_a_foreign_newer_or_damaged_config_is_one_line(tmp_path: Path, config: str, says: str) -> None:
    (tmp_path / "config.json").write_text(config)
    with pytest.raises(CheckpointError, match=says) as error:
        read_export_config(tmp_path)
    assert "\n" not in str(error.value)


def test_the_hint_says_where_the_export_came_from(tmp_path: Path) -> None:
    hint = reexport_hint(tmp_path / "gone", {"exported_from": "rope/checkpoints/best.pt"})
    assert "--model_path <the folder holding that run>/rope/checkpoints/best.pt" in hint
    assert "move" in hint  # not an export of ours: it is never replaced, only written anew
