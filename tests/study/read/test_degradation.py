"""The length study's degradation (study/read/degradation.py), from test.py's per-pair sums: a
hand-computed example (one pair, one k), pairs cut at the decoder's limit left out, pooling over k
with the test pair as the unit, the selections by where a pair starts, and damaged files named."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.teacher_forced import PAIRS_FILE, PAIRS_HEADER
from settings.config import from_raw
from study.read.degradation import degradation_stats, pooled, read_pair_sums, run_degradation, selections
from study.records import Configuration, RunRecord, RunTeacherForced, frozen_map
from study.terms import ALL_K, Span, SpanKind

# k, pair, start, tokens, nll_sum, nll_no_eos_sum, beyond_tokens, beyond_nll_no_eos_sum
ROWS = [
    (1, 0, 0, 2, 3.1, 3.0, 0, 0.0),
    (1, 1, 0, 3, 4.6, 4.5, 0, 0.0),
    (2, 0, 0, 2, 5.2, 5.0, 0, 0.0),  # pair 0 joined at k = 2: 5.0 against 3.0 alone
    (2, 1, 4, 3, 9.1, 9.0, 3, 9.0),  # pair 1 starts at position 4, beyond a training length of 4
    (3, 0, 0, 2, 6.1, 6.0, 0, 0.0),
    (3, 1, 4, 2, 5.0, 4.9, 2, 4.9),  # cut at the decoder's limit: 2 of its 3 tokens, left out at k = 3
]


def write_run(tmp_path, rows=ROWS, training_length=4):
    test = tmp_path / "run" / "test"
    test.mkdir(parents=True)
    lines = [PAIRS_HEADER] + ["\t".join(str(x) for x in r) for r in rows]
    (test / PAIRS_FILE).write_text("\n".join(lines) + "\n")
    tf = RunTeacherForced(training_length, (0, 4, 8), None, (), frozen_map({}))
    return RunRecord(run=str(tmp_path / "run"), seed=1, teacher_forced=tf)


def test_one_pair_at_one_k_by_hand(tmp_path):
    sums = read_pair_sums(write_run(tmp_path))
    k2 = dict((span, keep) for span, keep, _ in selections(sums))[Span(SpanKind.AT_K, 2)]
    units = sums.units(k2)
    # pair 0: (NLL joined - NLL alone) / tokens = (5.0 - 3.0) / 2, the EOS-renormalised sums
    assert units[0].tolist() == pytest.approx([2.0, 2.0])
    assert units[1].tolist() == pytest.approx([4.5, 3.0])  # pair 1: 9.0 - 4.5 over its 3 tokens
    assert pooled(units) == pytest.approx((2.0 + 4.5) / 5)


def test_pooled_over_k_the_unit_is_the_pair_and_cut_pairs_are_left_out(tmp_path):
    sums = read_pair_sums(write_run(tmp_path))
    keep = dict((span.column, keep) for span, keep, _ in selections(sums))
    everything = sums.units(keep["all k"])
    # pair 0 at k = 2 and 3: (5.0 - 3.0) + (6.0 - 3.0) over 2 + 2 tokens; pair 1 only at k = 2
    assert np.allclose(everything, [[5.0, 4.0], [4.5, 3.0]])
    assert sums.units(keep["k=3"])[1].tolist() == [0.0, 0.0]
    assert np.allclose(sums.units(keep["start beyond training"]), [[0.0, 0.0], [4.5, 3.0]])
    assert np.allclose(sums.units(keep["start within training"]), [[5.0, 4.0], [0.0, 0.0]])
    got = run_degradation(write_run(tmp_path / "b"))
    assert got[ALL_K] == pytest.approx(9.5 / 7) and got[Span(SpanKind.START_BUCKET, start=(4, 8))] == pytest.approx(1.5)
    assert Span(SpanKind.START_BUCKET, start=(8, None)) not in got  # no pair starts there


def test_seeds_are_averaged_and_a_run_without_the_file_is_left_out(tmp_path):
    a = write_run(tmp_path / "a")
    b = write_run(tmp_path / "b", [r if r[:2] != (2, 0) else (2, 0, 0, 2, 5.2, 7.0, 0, 0.0) for r in ROWS])
    stats = degradation_stats([run_degradation(r) for r in (a, b, RunRecord(run=str(tmp_path / "none"), seed=3))])
    values = [9.5 / 7, 11.5 / 7]  # pair 0 at k = 2 is 2.0 worse in b
    assert stats[ALL_K].n == 2 and stats[ALL_K].mean == pytest.approx(np.mean(values))
    assert stats[ALL_K].std == pytest.approx(np.std(values, ddof=1))


def test_a_damaged_file_is_named(tmp_path):
    run = write_run(tmp_path)
    path = tmp_path / "run" / "test" / PAIRS_FILE
    path.write_text(PAIRS_HEADER + "\n1\t0\tx\n")
    with pytest.raises(ValueError, match="teacher_forced_pairs.tsv is damaged"):
        read_pair_sums(run)
    path.write_text("k\tpair\n")
    with pytest.raises(ValueError, match="header"):
        read_pair_sums(run)


def test_a_comparison_counts_only_the_cells_every_run_scored_whole(tmp_path):
    """A pair cut at the decoder's limit in one run is left out of every run of the comparison, so
    both sides hold the same tokens (here the runs differ only in that cell: no difference)."""
    from study.judge.findings import compare_degradation
    from study.read.run_outputs import read_outputs

    def rows(cut: bool):
        out = []
        for p in range(12):
            out += [(1, p, 0, 3, 4.0, 4.0, 0, 0.0), (2, p, 3, 3, 5.0, 5.0, 0, 0.0)]
        out.append((3, 0, 0, 2 if cut else 3, 9.0, 9.0, 0, 0.0))  # pair 0 at k = 3: cut in one run only
        return out

    a, b = write_run(tmp_path / "a", rows(cut=True)), write_run(tmp_path / "b", rows(cut=False))
    keep = dict((span, keep) for span, keep, _ in selections(read_pair_sums(a)))[ALL_K]
    base = Configuration((b,), "b")
    got = compare_degradation([(a, b)], read_outputs([base, Configuration((a,), "a")], base), keep, 200, 1)
    assert got.mean_difference == pytest.approx(0.0) and got.num_sentences == 12
    alone = read_pair_sums(b).units(keep)  # by itself, b counts the cell a lost
    assert alone[0, 1] == 6


def test_compare_names_a_damaged_per_pair_file_in_one_line(tmp_path, capsys):
    from helpers import plain_copy

    from commands import compare
    from commands.cli import main_guard

    for name in ("rope", "sinusoidal"):
        plain_copy(f"demo/{name}", tmp_path / name)
    with open(tmp_path / "rope" / "test" / PAIRS_FILE, "a") as f:
        f.write("garbage\n")
    assert main_guard(compare.main, [str(tmp_path / "*"), "--no_significance"]) == 2
    err = capsys.readouterr().err.strip()
    assert "teacher_forced_pairs.tsv is damaged" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "damage, says",
    [
        (
            lambda lines: [*lines[:5], lines[5].rsplit("\t", 1)[0] + "\tnan", *lines[6:]],
            "teacher_forced_pairs.tsv:6 is damaged",
        ),
        (
            lambda lines: [*lines[:3], "\t".join([*lines[3].split("\t")[:4], "-6.5", "-6.59", "0", "0"]), *lines[4:]],
            ":4 is damaged",
        ),
        (lambda lines: [x for x in lines if not x.startswith("8\t")], "no line for k = 8"),
        (lambda lines: [x for x in lines if not x.startswith("1\t0\t")], "not every test pair is scored alone once"),
    ],
    ids=["nan", "negative NLL", "k = 8 deleted", "a pair's alone line deleted"],
)
def test_per_pair_sums_that_are_not_what_test_py_wrote_are_refused(tmp_path, damage, says):
    """A per-pair file with the k = 8 lines deleted, a nan or impossible negative NLLs changed the
    degradation with exit 0 (round four): refused, naming the file (and the line)."""
    from helpers import plain_copy
    from in_process import run_in_process

    for name in ("rope", "sinusoidal"):
        plain_copy(f"demo/{name}", tmp_path / name)
    path = tmp_path / "rope" / "test" / PAIRS_FILE
    path.write_text("\n".join(damage(path.read_text().splitlines())) + "\n")
    proc = run_in_process(["compare.py", str(tmp_path / "rope"), str(tmp_path / "sinusoidal"), "--no_significance"])
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-500:]


def test_joined_pair_training_gets_a_pooled_row_beyond_its_range_and_marks_inside(tmp_path):
    from study.read.run_stats import joined_training_k
    from study.terms import joined_range

    sums = read_pair_sums(write_run(tmp_path))
    beyond = Span(SpanKind.BEYOND_JOINED, 2)
    spans = [span for span, _, _ in selections(sums, joined_k=2)]
    assert spans[:2] == [ALL_K, beyond] and beyond.column == "beyond joined training (k > 2)"  # pooled over k = 3
    keep = dict((span, keep) for span, keep, _ in selections(sums, joined_k=2))
    assert np.allclose(sums.units(keep[beyond]), sums.units(keep[Span(SpanKind.AT_K, 3)]))
    assert all(x.kind is not SpanKind.BEYOND_JOINED for x, _, _ in selections(sums, joined_k=3))  # no k beyond
    assert all(x.kind is not SpanKind.BEYOND_JOINED for x, _, _ in selections(sums))  # single sentences: none

    def trained(**joins) -> RunRecord:
        return RunRecord(run="r", config=from_raw({"data": {"train_concat": joins}}))

    assert joined_training_k(trained(prob=0.25, max_k=4)) == 4 and joined_training_k(trained()) == 1
    assert joined_training_k(trained(prob=0.0, max_k=4)) == 1
    assert joined_range(4, 4).startswith("inside the joined training range (k <= 4): not extrapolation")
    assert joined_range(4, 8) == "beyond the joined training range (k > 4)"
    assert joined_range(4, 1) is None and joined_range(1, 8) is None  # the test set; no joined training
    assert joined_range(4, None).startswith("pools k inside and beyond")
