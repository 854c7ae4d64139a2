"""What a journal names (utils/journal.py): its files relative to its own folder, so a moved or copied
folder's pending publication is finished where it now is, and nothing outside the folder is written
from a journal that was not begun there (issue 75). Through the real commands:
tests/guarantees/test_moved_journals.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from utils.errors import HarnessError
from utils.journal import journal_text, read_plan
from utils.publish import OutputSet, finish_publishing, journal_file, staging_folder


def files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_journal_names_its_files_relative_to_its_folder_and_is_read_where_it_now_is(tmp_path: Path) -> None:
    """Written in R, read in a copy: every path is the copy's; an entry leading out of the folder (a
    `..`, an absolute name, an earlier version's names elsewhere) is refused, naming the journal."""
    run = tmp_path / "R"
    place, staging = run / "test", staging_folder(run / "test")
    (staging / "test").mkdir(parents=True)
    text = journal_text(run, [(staging / "test" / "a", place / "a")], [place / "old"])
    plan = json.loads(text)
    assert plan["moves"] == [[".test.staging/test/a", "test/a"]] and plan["removes"] == ["test/old"]
    journal_file(place).write_text(text)
    copy = shutil.copytree(run, tmp_path / "R_copy")
    moves, removes = read_plan(journal_file(copy / "test"), staging_folder(copy / "test"), "test.py")
    assert moves == [(copy / ".test.staging/test/a", copy / "test/a")] and removes == [copy / "test/old"]

    for outside in ("../R/test/a", str(place / "a"), "test/.."):
        journal_file(copy / "test").write_text(json.dumps({**plan, "moves": [[".test.staging/test/a", outside]]}))
        with pytest.raises(HarnessError, match=f"outside {copy}"):
            read_plan(journal_file(copy / "test"), staging_folder(copy / "test"), "test.py")
    earlier = {"moves": [[str(staging / "test" / "a"), str(place / "a")]], "removes": []}  # (no "format")
    journal_file(place).write_text(json.dumps(earlier))
    assert read_plan(journal_file(place), staging, "test.py") == ([(staging / "test" / "a", place / "a")], [])
    journal_file(copy / "test").write_text(json.dumps(earlier))
    with pytest.raises(HarnessError, match="written by an earlier version of the harness"):
        read_plan(journal_file(copy / "test"), staging_folder(copy / "test"), "test.py")


def test_a_journal_writing_through_a_link_outside_is_finished_only_where_it_was_begun(
    tmp_path: Path, monkeypatch
) -> None:
    """compare.py writes a summary file that is a link through to its target (`targets`), which may lie
    outside the folder: a journal so begun is finished where it was begun, and in a copy of the folder
    (or the folder moved) refused in one line naming it, writing nothing (issue 75: no reader writes
    outside the folder it is in; utils/journal.py)."""
    import utils.publish

    folder, outside = tmp_path / "runs", tmp_path / "elsewhere" / "kept.md"
    folder.mkdir()
    outside.parent.mkdir()
    outside.write_text("old")
    (folder / "summary.md").symlink_to(outside)

    def killed(what: str, path: Path) -> None:  # (a kill at the first move: the journal is there)
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(utils.publish, "write_point", killed)
        with pytest.raises(KeyboardInterrupt), OutputSet(folder / "summary", "compare.py") as out:
            (out.staging / "summary.md").write_text("new")
            (out.staging / "summary.csv").write_text("rows")
            out.publish(targets={out.staging / "summary.md": outside.resolve()})
    assert journal_file(folder / "summary").exists() and outside.read_text() == "old"

    copy = shutil.copytree(folder, tmp_path / "copy", symlinks=True)
    before = files(copy)
    with pytest.raises(HarnessError, match=f"was begun in {folder} and names {outside}, outside {copy}"):
        finish_publishing(copy / "summary", writer="compare.py")
    # (the command entering the set names itself: run the same command again where it was begun)
    with pytest.raises(HarnessError, match=r"a stopped compare\.py left unfinished.*run compare\.py again there"):
        OutputSet(copy / "summary", "compare.py").__enter__()
    assert outside.read_text() == "old" and files(copy) == before  # nothing of it done in the copy

    assert finish_publishing(folder / "summary") and outside.read_text() == "new"  # where it was begun
    assert (folder / "summary.csv").read_text() == "rows" and (folder / "summary.md").is_symlink()
