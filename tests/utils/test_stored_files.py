"""The one reader of run outputs (utils/stored_files.py): the plain file test.py writes and each form
the archive stores decode to the same text; a damaged, doubled or mismatched one is one line."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest
from helpers import ROOT, one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st
from in_process import run_in_process

from tools.archive import pack
from utils.stored_files import StoredFileError, content_name, decode_columns, encode_columns, make_bundle, read_text

PAIRS = "k\tpair\ttokens\tnll\n1\t0\t8\t30.325397\n1\t1\t10\t0.000000\n2\t0\t9\t-1.500000\n"


def test_each_form_reads_as_the_plain_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "teacher_forced_pairs.tsv"
    plain.parent.mkdir()
    plain.write_text(PAIRS)
    (tmp_path / "xz").mkdir()
    (tmp_path / "xz" / "teacher_forced_pairs.tsv.xz").write_bytes(lzma.compress(PAIRS.encode()))
    (tmp_path / "cols").mkdir()
    (tmp_path / "cols" / "teacher_forced_pairs.tsv.cols.xz").write_bytes(lzma.compress(encode_columns(PAIRS)))
    store = tmp_path / "study" / "test_sets"
    store.mkdir(parents=True)
    (store / f"{content_name(PAIRS)}.txt.xz").write_bytes(lzma.compress(PAIRS.encode()))
    run_test = tmp_path / "study" / "run" / "test"
    run_test.mkdir(parents=True)
    (run_test / "teacher_forced_pairs.tsv.sha256").write_text(content_name(PAIRS) + "\n")
    (tmp_path / "bundle").mkdir()
    bundle = make_bundle({"teacher_forced_pairs.tsv": PAIRS, "concat/k2/teacher_forced_pairs.tsv": "two\n"})
    (tmp_path / "bundle" / "teacher_forced_pairs.tsv.tar.xz").write_bytes(lzma.compress(bundle))
    (tmp_path / "study" / "run" / "test_sets").mkdir()  # a variant test named test_sets/ is not the store
    for folder in ("plain", "xz", "cols", "study/run/test", "bundle"):
        assert read_text(tmp_path / folder / "teacher_forced_pairs.tsv") == PAIRS
    assert read_text(tmp_path / "bundle" / "concat" / "k2" / "teacher_forced_pairs.tsv") == "two\n"
    assert read_text(tmp_path / "bundle" / "concat" / "k4" / "teacher_forced_pairs.tsv") is None
    assert read_text(tmp_path / "missing.tsv") is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-(10**12), 10**12), st.integers(0, 10**6)), min_size=1, max_size=30),
    st.integers(0, 7),
)
def test_columns_decode_to_the_same_text(rows: list[tuple[int, int]], decimals: int) -> None:
    text = "a\tb\n" + "".join(f"{a / 10**decimals:.{decimals}f}\t{b}\n" for a, b in rows)
    encoded = encode_columns(text)
    assert encoded is not None and decode_columns(encoded, Path("x")) == text


def test_text_that_is_not_a_table_is_not_stored_by_column() -> None:
    beyond_int64 = "99999999999999999999\n"
    for text in (
        "a\tb\n1\t2\n3\n",
        "x\n1.5\n2.25\n",
        "1\t02\n",
        "-0.000\n",
        "hello\nworld\n",
        "",
        beyond_int64,
        "\u00b2\n",
    ):
        assert encode_columns(text) is None


def test_a_damaged_or_doubled_or_mismatched_form_is_refused(tmp_path: Path) -> None:
    (tmp_path / "h.txt.xz").write_bytes(lzma.compress(b"one\ntwo\n")[:-9])
    with pytest.raises(StoredFileError, match=r"h.txt.xz is not a complete xz stream .*git checkout"):
        read_text(tmp_path / "h.txt")
    (tmp_path / "h.txt").write_text("one\n")
    with pytest.raises(StoredFileError, match="are two forms of"):
        read_text(tmp_path / "h.txt")
    store = tmp_path / "test_sets"
    store.mkdir()
    (store / f"{'0' * 64}.txt.xz").write_bytes(lzma.compress(b"edited\n"))
    (tmp_path / "r.txt.sha256").write_text("0" * 64)
    with pytest.raises(StoredFileError, match="does not hold the text its name is the sha256 of"):
        read_text(tmp_path / "r.txt")
    (tmp_path / "concat" / "k2").mkdir(parents=True)
    (tmp_path / "concat" / "k2" / "h.txt.xz").write_bytes(lzma.compress(b"one\n"))
    (tmp_path / "h.txt.tar.xz").write_bytes(lzma.compress(make_bundle({"concat/k2/h.txt": "one\n"})))
    with pytest.raises(StoredFileError, match="are two forms of"):
        read_text(tmp_path / "concat" / "k2" / "h.txt")
    (tmp_path / "b.txt.tar.xz").write_bytes(lzma.compress(b"not a tar archive" * 40))
    with pytest.raises(StoredFileError, match="b.txt.tar.xz is not a complete tar archive"):
        read_text(tmp_path / "b.txt")


@pytest.fixture(scope="module")
def two_archived_runs(tmp_path_factory) -> Path:
    """Two archived demo runs and their study's shared texts, re-packed (a no-op: already archived)."""
    study = tmp_path_factory.mktemp("archive") / "results" / "demo"
    for name in ("rope", "sinusoidal", "test_sets"):
        shutil.copytree(ROOT / "results" / "demo" / name, study / name)
    pack([study / "rope", study / "sinusoidal"], study.parent, None)
    return study


@pytest.mark.slow
def test_compare_reads_archived_runs_and_names_a_damaged_file(two_archived_runs: Path, tmp_path: Path) -> None:
    study = tmp_path / "demo"
    shutil.copytree(two_archived_runs, study)
    ok = run_in_process(["compare.py", str(study / "rope"), str(study / "sinusoidal"), "--bootstrap_samples", "50"])
    assert ok.returncode == 0, ok.stderr
    assert "demo/rope" in ok.stdout and "demo/sinusoidal" in ok.stdout
    hyps = study / "rope" / "test" / "hypotheses.txt.tar.xz"
    hyps.write_bytes(hyps.read_bytes()[:-20])  # cut short, as a failed copy leaves it
    bad = run_in_process(["compare.py", str(study / "rope"), str(study / "sinusoidal")])
    assert bad.returncode == 2
    assert one_error_line(bad) == (
        f"error: {hyps} is not a complete xz stream (damaged); restore it (git checkout -- {hyps}) "
        f"or test the run again"
    )
