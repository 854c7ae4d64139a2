"""`make archive` (tools/archive.py) copies each tested run into results/ without what compare.py does
not need, in the stored forms: config, metrics and provenance as they are; every scored test folder
(<run>/test/, <run>/test_<name>/) compressed, tables by column, the references and sources once per
study by content; archiving again changes no file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, one_error_line

from settings.config import is_written_config
from tools.archive import pack
from utils.errors import HarnessError
from utils.run_folder import LOCK_FILES
from utils.stored_files import ARCHIVED, read_text

PAIRS = "k\tpair\tnll\n1\t0\t1.250000\n1\t1\t0.500000\n"
RECORDS = {
    "metrics.jsonl": '{"event": "end"}\n',
    "training_lengths.json": "{}\n",
    "provenance.json": '{"sessions": []}\n',
}


def make_run(run: Path, hypothesis: str) -> None:
    for folder in ("test", "test_yarn4", "checkpoints", "test/concat/k2"):
        (run / folder).mkdir(parents=True)
    for name in ("config.yaml", "metrics.jsonl", "training_lengths.json", "provenance.json", "checkpoints/best.pt"):
        (run / name).write_text(RECORDS.get(name, name))
    (run / "data_report.json").write_text('{"corpus": "the same for every run"}\n')
    for folder in ("test", "test_yarn4", "test/concat/k2"):
        (run / folder / "hypotheses.txt").write_text(f"{hypothesis}\n")
        (run / folder / "references.txt").write_text("the reference\n")
        (run / folder / "sources.txt").write_text("la source\n")
    for folder in ("test", "test_yarn4"):
        (run / folder / "scores.json").write_text("{}")
        (run / folder / "teacher_forced_pairs.tsv").write_text(PAIRS)
    (run / "test_unscored").mkdir()  # a variant test cut short: no scores, not archived
    (run / "test_unscored" / "hypotheses.txt").write_text("a\n")


def archived(run: Path) -> list[str]:
    """The archived run's files (not the run lock every run folder carries: utils/run_folder.RunLock)."""
    return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file() and p.name not in LOCK_FILES)


def test_archive_stores_each_run_compactly_and_each_shared_text_once(tmp_path: Path) -> None:
    for name, hypothesis in (("rope", "a"), ("rope_seed1", "b")):
        make_run(tmp_path / "runs" / "length" / name, hypothesis)
    pack([tmp_path / "runs" / "length"], tmp_path / "results", tmp_path / "runs")
    study = tmp_path / "results" / "length"
    tests = [
        f"{folder}/{name}"
        for folder in ("test", "test_yarn4")
        for name in (
            "references.txt.sha256",
            "scores.json.xz",
            "sources.txt.sha256",
            "teacher_forced_pairs.tsv.cols.xz",
        )
    ]
    tests += ["test/hypotheses.txt.tar.xz", "test_yarn4/hypotheses.txt.xz"]  # with its concat/k<K>/ ones; alone
    concat = ["test/concat/k2/references.txt.sha256", "test/concat/k2/sources.txt.sha256"]
    assert archived(study / "rope") == sorted(
        ["config.yaml", "data_report.json.sha256", "metrics.jsonl", "provenance.json", "training_lengths.json"]
        + [*tests, *concat]
    )
    assert len(list((study / "test_sets").iterdir())) == 3  # the references, the sources, the corpus report
    for run, hypothesis in (("rope", "a"), ("rope_seed1", "b")):
        assert read_text(study / run / "test_yarn4" / "hypotheses.txt") == f"{hypothesis}\n"
        assert read_text(study / run / "test" / "concat" / "k2" / "hypotheses.txt") == f"{hypothesis}\n"
        assert read_text(study / run / "test" / "concat" / "k2" / "references.txt") == "the reference\n"
        assert read_text(study / run / "test" / "teacher_forced_pairs.tsv") == PAIRS
        assert read_text(study / run / "data_report.json") == '{"corpus": "the same for every run"}\n'
    before = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    pack([tmp_path / "runs" / "length"], tmp_path / "results", tmp_path / "runs")  # again: nothing changes
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == before
    pack([study], tmp_path / "results", None)  # re-stored in place: nothing changes either
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == before


def test_a_person_reads_archived_outputs_with_an_ordinary_command(tmp_path: Path) -> None:
    """results/README.md: `tar -xOf` for hypotheses, `xzcat` for scores, `tools/archive.py cat` for
    any stored file, `tools/archive.py unpack` for a whole run as plain files."""
    run = ROOT / "results" / "demo" / "rope" / "test"
    for member in ("hypotheses.txt", "concat/k4/hypotheses.txt"):
        tar = ["tar", "-xOf", str(run / "hypotheses.txt.tar.xz"), member]
        assert subprocess.run(tar, capture_output=True, text=True, check=True).stdout == read_text(run / member)
    shown = subprocess.run(["xzcat", str(run / "scores.json.xz")], capture_output=True, text=True, check=True)
    assert shown.stdout == read_text(run / "scores.json")
    unpacked = tmp_path / "rope"
    unpack = [sys.executable, str(ROOT / "tools" / "archive.py"), "unpack", str(run.parent), str(unpacked)]
    subprocess.run(unpack, capture_output=True, check=True)
    for plain in (unpacked / "test").rglob("*"):
        if plain.is_file():
            assert plain.read_text() == read_text(run / plain.relative_to(unpacked / "test")), plain
    cat = [sys.executable, str(ROOT / "tools" / "archive.py"), "cat", str(run / "references.txt")]
    assert subprocess.run(cat, capture_output=True, text=True, check=True).stdout == read_text(run / "references.txt")


def test_a_run_copied_back_from_the_archive_is_tested_again_into_plain_files(trained_run: Path, tmp_path) -> None:
    """Archived test outputs copied back into a run: test.py refuses to write beside them without
    --overwrite, and with it replaces them, leaving no archived form to mix with its own. Packing
    a run in place is refused while it holds what the archive drops (its checkpoints)."""
    import shutil

    from in_process import run_in_process

    first = run_in_process(["test.py", "--run", str(trained_run), "--set", "decoding.beam_size=1"])
    assert first.returncode == 0, first.stderr
    with pytest.raises(HarnessError, match="holds checkpoints"):
        pack([trained_run], trained_run.parent, None)
    pack([trained_run], tmp_path / "results", trained_run.parent)
    test = trained_run / "test"
    shutil.rmtree(test)
    shutil.copytree(tmp_path / "results" / "run" / "test", test)
    shutil.copytree(tmp_path / "results" / "test_sets", trained_run.parent / "test_sets")
    assert (test / "hypotheses.txt.tar.xz").is_file() and not (test / "hypotheses.txt").exists()
    refused = run_in_process(["test.py", "--run", str(trained_run), "--set", "decoding.beam_size=1"])
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    again = run_in_process(["test.py", "--run", str(trained_run), "--set", "decoding.beam_size=1", "--overwrite"])
    assert again.returncode == 0, again.stderr
    left = sorted(p.name for p in test.rglob("*") if p.name.endswith(ARCHIVED))
    assert left == [] and (test / "hypotheses.txt").is_file() and (test / "scores.json").is_file()


def test_archiving_again_after_a_run_lost_its_joined_inputs_stores_its_own_hypotheses(tmp_path: Path) -> None:
    """A bundle of the earlier archive is never reused as the single file's form (review finding)."""
    run = tmp_path / "runs" / "st" / "r1"
    make_run(run, "a")
    pack([tmp_path / "runs" / "st"], tmp_path / "results", tmp_path / "runs")
    shutil.rmtree(run / "test" / "concat")
    pack([tmp_path / "runs" / "st"], tmp_path / "results", tmp_path / "runs")
    archived_test = tmp_path / "results" / "st" / "r1" / "test"
    assert (archived_test / "hypotheses.txt.xz").is_file() and not (archived_test / "hypotheses.txt.tar.xz").exists()
    assert read_text(archived_test / "hypotheses.txt") == "a\n"


def test_an_archived_run_copied_back_is_the_harness_own_and_keeps_what_only_the_archive_has(tmp_path: Path) -> None:
    """A copy in runs/ is a run folder of the harness (not foreign); packing from runs/ keeps a
    provenance.json that only the archive holds (a backfilled one)."""
    from utils.run_folder import RunFolder

    shutil.copytree(ROOT / "results" / "demo" / "rope", tmp_path / "runs" / "demo" / "rope")
    assert RunFolder.inspect(tmp_path / "runs" / "demo" / "rope", is_written_config).state != "foreign"
    run = tmp_path / "runs" / "st" / "r1"
    make_run(run, "a")
    (run / "provenance.json").unlink()
    pack([tmp_path / "runs" / "st"], tmp_path / "results", tmp_path / "runs")
    backfilled = '{"sessions": [{"device_kind": "cpu"}], "inferred": ["device_kind"]}\n'
    (tmp_path / "results" / "st" / "r1" / "provenance.json").write_text(backfilled)
    pack([tmp_path / "runs" / "st"], tmp_path / "results", tmp_path / "runs")
    assert (tmp_path / "results" / "st" / "r1" / "provenance.json").read_text() == backfilled


def test_an_unpack_that_stops_midway_leaves_no_run_and_runs_again(tmp_path: Path) -> None:
    """unpack builds beside its target and puts it in place whole: a failure (here a damaged file)
    leaves no half run folder, and the same command then finishes it."""
    from tools.archive import unpack_run
    from utils.stored_files import StoredFileError

    study = tmp_path / "demo"
    for name in ("rope", "test_sets"):
        shutil.copytree(ROOT / "results" / "demo" / name, study / name)
    scores = study / "rope" / "test" / "scores.json.xz"
    good = scores.read_bytes()
    scores.write_bytes(good[:-9])
    with pytest.raises(StoredFileError):
        unpack_run(study / "rope", tmp_path / "plain" / "rope")
    assert not (tmp_path / "plain" / "rope").exists()
    scores.write_bytes(good)
    unpack_run(study / "rope", tmp_path / "plain" / "rope")
    assert (tmp_path / "plain" / "rope" / "test" / "scores.json").read_text() == read_text(
        study / "rope" / "test" / "scores.json"
    )
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["rope"]  # no build folder left


def test_the_archive_tool_refuses_in_one_line_and_finishes_what_a_stopped_test_left(tmp_path: Path) -> None:
    """Through the real entry point (issue 67): a folder that does not exist, a pointer that is not
    UTF-8: one line, exit 2; a run whose test.py was stopped mid-publish is finished first, so the
    archive holds the new test set whole, never the mix."""
    import json

    from in_process import run_in_process

    from utils.publish import journal_file, staging_folder

    proc = run_in_process(["tools/archive.py", "pack", str(tmp_path / "runs" / "nosuch")])
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "is not a folder" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

    run = tmp_path / "runs" / "demo" / "rope"
    make_run(run, "old")
    shutil.rmtree(run / "checkpoints")
    stage = staging_folder(run / "test") / "test"
    stage.mkdir(parents=True)
    (stage / "scores.json").write_text('{"new": true}')
    (run / "test" / "hypotheses.txt").write_text("new\n")  # (moved before the kill)
    plan = {"moves": [[str(stage / "scores.json"), str(run / "test" / "scores.json")]], "removes": []}
    journal_file(run / "test").write_text(json.dumps(plan))
    results = tmp_path / "results"
    proc = run_in_process(
        ["tools/archive.py", "pack", str(run.parent), "--runs", str(tmp_path / "runs"), "--results", str(results)]
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "completed" in proc.stdout and read_text(results / "demo" / "rope" / "test" / "scores.json") == '{"new": true}'
    )

    pointer = results / "demo" / "rope" / "test" / "references.txt.sha256"
    pointer.write_bytes(b"\xff\xfe not utf-8")
    for args in (["cat", str(pointer.with_name("references.txt"))], ["pack", "--in-place", str(results / "demo")]):
        proc = run_in_process(["tools/archive.py", *args])
        assert proc.returncode == 2 and "is not UTF-8 text" in proc.stderr and "Traceback" not in proc.stderr, args
        assert len(proc.stderr.strip().splitlines()) == 1


def recorded_run(run: Path) -> Path:
    """make_run's run with the records test.py writes: each output file's rows and sha256 in scores.json."""
    from commands.test_folder import file_records

    make_run(run, "a")
    for folder in ("test", "test_yarn4"):
        (run / folder / "scores.json").unlink()
        scores = {"sacrebleu": 1.0, "files": file_records(run / folder)}
        (run / folder / "scores.json").write_text(json.dumps(scores))
    return run


@pytest.mark.parametrize(
    "damage, named",
    [
        ("test/hypotheses.txt", "test/hypotheses.txt is not the file test.py wrote"),  # edited after test.py
        ("test/concat/k2/hypotheses.txt", "test/concat/k2/hypotheses.txt is missing, though"),
        ("test_yarn4/scores.json", "test_yarn4/scores.json is not readable JSON"),
        ("metrics.jsonl", "metrics.jsonl:2: not a JSON object"),
        ("training_lengths.json", "training_lengths.json is not JSON"),
    ],
)
@pytest.mark.slow
def test_pack_refuses_a_run_that_fails_its_own_records(tmp_path: Path, damage: str, named: str) -> None:
    """Issue 75 (case 3): a file that fails the run's records (the sha256 scores.json holds, JSON, JSON
    lines) is one line naming it, exit 2, and nothing of the pack is archived (not even a good run
    beside it); the run as test.py left it is archived."""
    from in_process import run_in_process

    runs, results = tmp_path / "runs", tmp_path / "results"
    recorded_run(runs / "st" / "good")
    bad = recorded_run(runs / "st" / "bad")
    pack = ["tools/archive.py", "pack", str(runs / "st"), "--runs", str(runs), "--results", str(results)]
    assert run_in_process(pack).returncode == 0  # (as test.py left them)
    shutil.rmtree(results)
    if damage.endswith("hypotheses.txt") and "concat" in damage:
        (bad / damage).unlink()
    elif damage == "metrics.jsonl":
        (bad / damage).write_text('{"event": "end"}\n{"event": "valid", "st\n')  # a torn line
    else:
        text = (bad / damage).read_text()
        (bad / damage).write_text(text + "edited\n" if damage.endswith(".txt") else text[: len(text) // 2])
    refused = run_in_process(pack)
    assert one_error_line(refused).startswith(f"error: {bad / named}"), refused.stderr
    assert not results.exists()


def test_every_subcommand_refuses_a_missing_source_or_a_folder_that_is_no_run(tmp_path: Path) -> None:
    """Issue 75 (case 3): unpack of a run the archive lacks, or of a folder that is no run, and pack of
    a folder holding no run: one line, exit 2, nothing created."""
    from in_process import run_in_process

    (tmp_path / "results" / "st" / "test_sets").mkdir(parents=True)
    target = tmp_path / "plain" / "r1"
    for source, said in (("r1", "is not a folder"), ("test_sets", "is no run folder (no config.yaml)")):
        proc = run_in_process(["tools/archive.py", "unpack", str(tmp_path / "results" / "st" / source), str(target)])
        assert said in one_error_line(proc) and not (tmp_path / "plain").exists()
    proc = run_in_process(["tools/archive.py", "pack", str(tmp_path / "results" / "st"), "--results", str(target)])
    assert "holds no run" in one_error_line(proc) and not (tmp_path / "plain").exists()
    proc = run_in_process(["tools/archive.py", "cat", str(tmp_path / "results" / "st" / "r1" / "config.yaml")])
    assert "no such file" in one_error_line(proc)


@pytest.mark.parametrize("inside", ["st/r1/archive", "st/archive", "st"])
def test_an_archive_inside_the_runs_it_packs_is_refused(tmp_path: Path, capsys, inside: str) -> None:
    """Issue 75: `pack runs/st --results runs/st/r1/archive` was accepted: the archive written into the
    run it archives (a later pack of that run reads its own archive as the run's files). Refused in
    one line, nothing written."""
    from tools.archive import main

    run = tmp_path / "runs" / "st" / "r1"
    make_run(run, "a")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    results = tmp_path / "runs" / inside
    assert (
        main(["pack", str(tmp_path / "runs" / "st"), "--runs", str(tmp_path / "runs"), "--results", str(results)]) == 2
    )
    assert (
        f"error: --results {results} is inside {tmp_path / 'runs' / 'st'}, which this pack reads"
        in capsys.readouterr().err
    )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert main(["pack", str(run), "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")]) == 0
