"""The teacher-forced length diagnostic (evaluation/teacher_forced.py): its figures equal a hand
computation from the model's log-softmax, boundaries of joined inputs stay out of the buckets, the
beyond/within split follows the decoder's training length, test.py writes it into scores.json, and
compare.py tabulates and plots it only when runs have it (older runs compare exactly as before)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
import torch
from helpers import BOS, EOS, PAD, UNK, plain_copy, tiny_model

from decoding.backend import HarnessDecoder
from evaluation.teacher_forced import check_position_buckets, teacher_forced_scores
from settings.config import ConfigError, ExperimentConfig

ROOT = Path(__file__).resolve().parents[2]

# Texts are token ids written out, so the test knows every id: 3 pairs, one document, so k = 2
# joins pairs 0+1 and leaves pair 2 alone (data/concat.py: groups stay inside a document).
PAIRS = [("5 6 7", "10 11 10"), ("8 9", "13 10 15 16"), ("17", "10")]
DOCS = ["d", "d", "d"]
EDGES = [0, 2, 4]  # buckets 0-1, 2-3, 4+


class IdTokenizer:
    """Whitespace-separated ids in, ids out; the special ids of tests/helpers.py."""

    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS

    def encode_src_batch(self, texts):
        return [[int(w) for w in t.split()] for t in texts]

    encode_tgt_batch = encode_src_batch


def ids(text: str) -> list[int]:
    return [int(w) for w in text.split()]


def config(edges=EDGES) -> ExperimentConfig:
    cfg = ExperimentConfig()
    cfg.evaluation.position_buckets = list(edges)
    cfg.decoding.max_tokens = 12  # several batches, with padding in them
    return cfg


def hand_tokens(model, src: list[int], tgt: list[int]) -> list[dict]:
    """Per target position, from one unbatched forward: the figures as the definitions state them."""
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([[BOS, *tgt]]))[0]
    logp = torch.log_softmax(logits, -1)
    rows = []
    for t, y in enumerate([*tgt, EOS]):
        p_eos = logp[t, EOS].exp().item()
        others = logits[t].clone()
        others[EOS] = -math.inf
        rows.append(
            {
                "t": t,
                "y": y,
                "nll": -logp[t, y].item(),
                "correct": int(logits[t].argmax()) == y,
                "p_eos": p_eos,
                "nll_no_eos": -logp[t, y].item() + math.log(1.0 - p_eos),
                "correct_no_eos": int(others.argmax()) == y,
            }
        )
    return rows


def hand_summary(rows: list[dict]) -> dict:
    no_eos = [r for r in rows if r["y"] != EOS]
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    return {
        "tokens": len(rows),
        "nll": mean([r["nll"] for r in rows]),
        "accuracy": mean([float(r["correct"]) for r in rows]),
        "tokens_no_eos": len(no_eos),
        "nll_no_eos": mean([r["nll_no_eos"] for r in no_eos]),
        "accuracy_no_eos": mean([float(r["correct_no_eos"]) for r in no_eos]),
    }


def check_summary(got: dict, rows: list[dict]) -> None:
    want = hand_summary(rows)
    for key, value in want.items():
        assert got[key] == (pytest.approx(value, abs=2e-6) if value is not None else None), (key, got, want)


def hand_entry(model, inputs: list[tuple[list[int], list[list[int]]]]):
    """Per-token rows of each input (source ids, member targets), split into kept and boundary rows."""
    kept, boundary = [], []
    for src, members in inputs:
        tgt = [t for m in members for t in m]
        starts, at = set(), 0
        for m in members:
            if m and at:
                starts.add(at)
            at += len(m)
        for r in hand_tokens(model, src, tgt):
            (boundary if r["t"] in starts else kept).append(r)
    return kept, boundary


class Leaning(torch.nn.Module):
    """A tiny model whose logits lean towards EOS, then token 10: an untrained model's argmax is
    never the reference, this one's often is (EOS targets), or is once EOS is taken out (10s)."""

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner, self.encoder_pe, self.decoder_pe = inner, inner.encoder_pe, inner.decoder_pe
        self.max_positions = inner.max_positions
        self.register_buffer("lean", torch.zeros(20))
        self.lean[EOS], self.lean[10] = 4.5, 4.0

    def forward(self, src, tgt_in):
        return self.inner(src, tgt_in) + self.lean


@pytest.fixture(scope="module")
def model():
    m = Leaning(tiny_model("sinusoidal", vocab=20, layers=1, seed=3)).eval()
    m.decoder_pe.training_length.fill_(3)  # positions 0-2 seen in training
    m.encoder_pe.training_length.fill_(4)
    return m


@pytest.fixture(scope="module")
def report(model):
    return teacher_forced_scores(HarnessDecoder(model), IdTokenizer(), PAIRS, DOCS, config(), "cpu", concat=[2])[0]


def test_figures_equal_a_hand_computation(model, report):
    """(a) every bucket's NLL, accuracy and EOS-renormalised figures, and the boundary p(EOS)."""
    single = [(ids(s), [ids(t)]) for s, t in PAIRS]
    joined = [
        (ids(PAIRS[0][0]) + ids(PAIRS[1][0]), [ids(PAIRS[0][1]), ids(PAIRS[1][1])]),
        (ids(PAIRS[2][0]), [ids(PAIRS[2][1])]),
    ]
    for k, inputs in (("1", single), ("2", joined)):
        entry = report["k"][k]
        kept, boundary = hand_entry(model, inputs)
        assert entry["inputs"] == len(inputs) and entry["target_tokens"] == len(kept) + len(boundary)
        assert [b["bucket"] for b in entry["buckets"]] == ["0-1", "2-3", "4+"][: len(entry["buckets"])]
        for b in entry["buckets"]:
            check_summary(b, [r for r in kept if b["from"] <= r["t"] and (b["to"] is None or r["t"] < b["to"])])
    boundary_rows = hand_entry(model, joined)[1]
    got = report["k"]["2"]["boundary"]
    assert got["tokens"] == len(boundary_rows) == 1
    assert got["p_eos"] == pytest.approx(boundary_rows[0]["p_eos"], abs=2e-6)
    assert got["nll"] == pytest.approx(boundary_rows[0]["nll"], abs=2e-6)
    assert "boundary" not in report["k"]["1"]
    # the figures are not trivially 0 or 1: EOS targets are argmax, 10s are argmax once EOS is out
    buckets = [b for e in report["k"].values() for b in e["buckets"]]
    assert any(0 < b["accuracy"] < 1 for b in buckets) and 0.1 < got["p_eos"] < 0.9
    assert any(b["accuracy_no_eos"] is not None and 0 < b["accuracy_no_eos"] < 1 for b in buckets)
    assert report["training_length"] == {"source": 4, "target": 3} and report["position_buckets"] == EDGES


def test_boundary_positions_stay_out_of_the_buckets(model, report):
    """(b) the joined input's boundary (target position 3: first token of pair 1) is in no bucket."""
    entry = report["k"]["2"]
    assert sum(b["tokens"] for b in entry["buckets"]) == entry["target_tokens"] - entry["boundary"]["tokens"]
    bucket_2_3 = next(b for b in entry["buckets"] if b["from"] == 2)
    # position 2 of both inputs' targets (the single pair has only 0-1: "18", EOS), position 3 is the boundary
    assert bucket_2_3["tokens"] == 1
    assert (
        entry["beyond_training"]["tokens"] + entry["within_training"]["tokens"]
        == entry["target_tokens"] - entry["boundary"]["tokens"]
    )


def test_beyond_and_within_split_at_the_decoder_training_length(model, report):
    """(c) t >= training_length (3) is beyond; with the length unrecorded (0) there is no split."""
    single = [(ids(s), [ids(t)]) for s, t in PAIRS]
    kept, _ = hand_entry(model, single)
    check_summary(report["k"]["1"]["beyond_training"], [r for r in kept if r["t"] >= 3])
    check_summary(report["k"]["1"]["within_training"], [r for r in kept if r["t"] < 3])
    joined = [
        (ids(PAIRS[0][0]) + ids(PAIRS[1][0]), [ids(PAIRS[0][1]), ids(PAIRS[1][1])]),
        (ids(PAIRS[2][0]), [ids(PAIRS[2][1])]),
    ]
    kept, _ = hand_entry(model, joined)
    check_summary(report["k"]["2"]["beyond_training"], [r for r in kept if r["t"] >= 3])
    # natural sentences by source length: all three sources are in the 1-9 bucket
    by_length = {b["bucket"]: b for b in report["by_source_length"]}
    assert by_length["1-9"]["inputs"] == 3 and by_length["10-14"]["inputs"] == 0
    assert by_length["1-9"]["buckets"] == report["k"]["1"]["buckets"] and by_length["10-14"]["buckets"] == []
    unrecorded = Leaning(tiny_model("sinusoidal", vocab=20, layers=1, seed=3)).eval()
    plain = teacher_forced_scores(HarnessDecoder(unrecorded), IdTokenizer(), PAIRS, DOCS, config(), "cpu", concat=[2])[
        0
    ]
    assert plain["training_length"] == {"source": 0, "target": 0}
    assert all(e["beyond_training"] is None and e["within_training"] is None for e in plain["k"].values())
    assert plain["k"]["2"]["buckets"] == report["k"]["2"]["buckets"]  # the same model weights


def test_per_input_sums_beyond_training_equal_a_hand_computation(model):
    """The per-input file (the paired test's unit): each input's NLL, EOS renormalised out, summed
    over its non-boundary target positions t >= the training length, and their count."""
    _, text, _ = teacher_forced_scores(HarnessDecoder(model), IdTokenizer(), PAIRS, DOCS, config(), "cpu", concat=[2])
    lines = text.splitlines()
    assert lines[0] == "k\tinput\ttokens\tnll_no_eos_sum"
    got = {(int(k), int(i)): (int(n), float(x)) for k, i, n, x in (line.split("\t") for line in lines[1:])}
    joined = [
        (ids(PAIRS[0][0]) + ids(PAIRS[1][0]), [ids(PAIRS[0][1]), ids(PAIRS[1][1])]),
        (ids(PAIRS[2][0]), [ids(PAIRS[2][1])]),
    ]
    want = {}
    for k, inputs in ((1, [(ids(s), [ids(t)]) for s, t in PAIRS]), (2, joined)):
        for i, one in enumerate(inputs):
            kept, _ = hand_entry(model, [one])
            far = [r for r in kept if r["t"] >= 3 and r["y"] != EOS]
            if far:
                want[(k, i)] = (len(far), sum(r["nll_no_eos"] for r in far))
    assert got.keys() == want.keys() and want
    for key, (n, x) in want.items():
        assert got[key][0] == n and got[key][1] == pytest.approx(x, abs=1e-5)


def test_per_pair_sums_are_the_same_tokens_alone_and_joined(model):
    """The per-pair file (the length study's degradation): each pair's target tokens after its
    first, EOS excluded, scored alone (k = 1) and inside its joined input (k = 2), by hand; its start
    position, and the part at positions >= the training length (3)."""
    _, _, text = teacher_forced_scores(HarnessDecoder(model), IdTokenizer(), PAIRS, DOCS, config(), "cpu", concat=[2])
    lines = text.splitlines()
    assert lines[0] == "k\tpair\tstart\ttokens\tnll_sum\tnll_no_eos_sum\tbeyond_tokens\tbeyond_nll_no_eos_sum"
    got = {(int(k), int(p)): [float(x) for x in rest] for k, p, *rest in (line.split("\t") for line in lines[1:])}
    tgt0, tgt1 = ids(PAIRS[0][1]), ids(PAIRS[1][1])
    alone = {i: hand_tokens(model, ids(s), ids(t)) for i, (s, t) in enumerate(PAIRS)}
    joined = hand_tokens(model, ids(PAIRS[0][0]) + ids(PAIRS[1][0]), tgt0 + tgt1)
    # pair 0 holds joined positions 1-2 (0 is its first token), pair 1 positions 4-6 (3 is the boundary)
    want = {
        (1, 0): (0, alone[0][1:3]),
        (1, 1): (0, alone[1][1:4]),
        (2, 0): (0, joined[1:3]),
        (2, 1): (3, joined[4:7]),
    }  # pair 2 has one token: nothing after its first, no row
    assert got.keys() == want.keys()
    for key, (start, rows) in want.items():
        far = [r for r in rows if r["t"] >= 3]
        assert got[key][:2] == [start, len(rows)] and got[key][4] == len(far), key
        assert got[key][2] == pytest.approx(sum(r["nll"] for r in rows), abs=1e-5)
        assert got[key][3] == pytest.approx(sum(r["nll_no_eos"] for r in rows), abs=1e-5)
        assert got[key][5] == pytest.approx(sum(r["nll_no_eos"] for r in far), abs=1e-5)
    assert [r["y"] for r in joined[4:7]] == tgt1[1:]  # the same tokens as pair 1 alone, after its first


def test_long_inputs_are_truncated_and_counted_and_empty_sources_left_out():
    model = tiny_model("learnable", vocab=20, layers=1, max_positions=4)
    pairs = [("5 6 7 8 9 10", "11 12 13 14 15 16"), ("", "17"), ("5", "6")]
    got = teacher_forced_scores(HarnessDecoder(model), IdTokenizer(), pairs, None, config(), "cpu")[0]["k"]["1"]
    assert (got["inputs"], got["empty_sources"], got["truncated_sources"], got["truncated_targets"]) == (2, 1, 1, 1)
    assert got["target_tokens"] == 4 + 2  # the long target cut to the decoder's 4 positions, "6" + EOS


def test_position_buckets_must_start_at_zero_and_increase():
    check_position_buckets([0, 8, 16])
    for bad in ([], [1, 8], [0, 8, 8], [0, 16, 8]):
        with pytest.raises(ConfigError, match="evaluation.position_buckets"):
            check_position_buckets(bad)


# ----------------------------------------------------------------------------- test.py and compare.py


def test_test_py_writes_the_diagnostic_into_scores_json(trained_run: Path, tmp_path: Path, capsys):
    """(d) a real run through test.py (in-process): scores.json["teacher_forced"] with its layout."""
    from commands import test as test_script

    out = tmp_path / "scored"
    assert test_script.main(["--run", str(trained_run), "--concat", "1", "2", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    tf = json.loads((out / "scores.json").read_text())["teacher_forced"]
    assert set(tf) >= {"definition", "training_length", "position_buckets", "k", "by_source_length"}
    assert set(tf["k"]) == {"1", "2"} and tf["position_buckets"] == ExperimentConfig().evaluation.position_buckets
    assert tf["training_length"]["source"] > 0 and tf["training_length"]["target"] > 0  # recorded by train.py
    for k, entry in tf["k"].items():
        assert {"inputs", "target_tokens", "buckets", "beyond_training", "within_training"} <= set(entry)
        assert ("boundary" in entry) == (k != "1")
        assert set(entry["buckets"][0]) == {
            "bucket",
            "from",
            "to",
            "tokens",
            "nll",
            "accuracy",
            "tokens_no_eos",
            "nll_no_eos",
            "accuracy_no_eos",
        }
        assert f"k={k} teacher-forced NLL" in printed
    assert tf["k"]["1"]["inputs"] == 10 and sum(b["inputs"] for b in tf["by_source_length"]) == 10
    assert tf["k"]["2"]["boundary"]["tokens"] == 5  # 10 test pairs (one order): 5 joined inputs, one boundary each
    off = tmp_path / "off"
    assert (
        test_script.main(["--run", str(trained_run), "--output", str(off), "--set", "evaluation.teacher_forced=false"])
        == 0
    )
    assert "teacher_forced" not in json.loads((off / "scores.json").read_text())


def synthetic(beyond: float, position: list[float], p_eos: float, length: int = 8) -> dict:
    """A teacher_forced report for an archived run: k = 1 and k = 2, two buckets each."""

    def part(tokens: int, nll: float) -> dict:
        return {
            "tokens": tokens + 1,
            "nll": nll,
            "accuracy": 0.5,
            "tokens_no_eos": tokens,
            "nll_no_eos": nll,
            "accuracy_no_eos": 0.5,
        }

    def entry(scale: int) -> dict:
        return {
            "inputs": 10,
            "target_tokens": 99,
            "buckets": [
                {"bucket": "0-7", "from": 0, "to": 8, **part(30 * scale, position[0])},
                {"bucket": "8-15", "from": 8, "to": 16, **part(10 * scale, position[1])},
            ],
            "beyond_training": part(10 * scale, beyond),
            "within_training": part(30 * scale, position[0]),
        }

    two = entry(2)
    two["boundary"] = {"tokens": 5, "p_eos": p_eos, "nll": 4.0}
    two["beyond_training"]["nll_no_eos"] = beyond + 1.0  # pooled with k = 1: (10 b + 20 (b + 1)) / 30
    return {
        "definition": "",
        "training_length": {"source": 7, "target": length},
        "position_buckets": [0, 8, 16],
        "k": {"1": entry(1), "2": two},
        "by_source_length": [],
    }


@pytest.mark.slow
def test_compare_adds_the_diagnostic_only_when_runs_have_it(tmp_path: Path):
    """(e) archived runs without it compare as before; with it, a column, two tables, a plot, the JSON."""
    from commands import compare

    runs = tmp_path / "runs"
    for name in ("rope", "rope_seed1", "sinusoidal", "sinusoidal_seed1"):
        plain_copy(f"demo/{name}", runs / "demo" / name)
        test = runs / "demo" / name / "test"  # as runs tested before the diagnostic existed
        scores = json.loads((test / "scores.json").read_text())
        scores.pop("teacher_forced", None)
        (test / "scores.json").write_text(json.dumps(scores))
        for extra in ("teacher_forced_beyond.tsv", "teacher_forced_pairs.tsv"):
            (test / extra).unlink(missing_ok=True)

    def summarise(prefix: str) -> dict:
        assert compare.main([str(runs / "demo" / "*"), "--output", str(tmp_path / prefix), "--no_significance"]) == 0
        return {s: (tmp_path / f"{prefix}{s}").read_text() for s in (".md", ".csv", ".json")}

    before = summarise("before")
    assert "TF NLL" not in before[".md"] and "tf_nll" not in before[".csv"] and "teacher_forced" not in before[".json"]
    assert not (tmp_path / "before_teacher_forced.png").exists()
    values = {
        "rope": (3.0, [2.0, 3.5], 0.6),
        "rope_seed1": (5.0, [2.2, 3.9], 0.8),
        "sinusoidal": (4.0, [2.1, 3.0], 0.7),
    }  # sinusoidal_seed1 stays an older run without it
    for name, (beyond, position, p_eos) in values.items():
        path = runs / "demo" / name / "test" / "scores.json"
        scores = json.loads(path.read_text())
        scores["teacher_forced"] = synthetic(beyond, position, p_eos)
        path.write_text(json.dumps(scores))
    after = summarise("after")
    md = after[".md"]
    # rope: pooled beyond = (10 b + 20 (b + 1)) / 30 per run -> 3.6667 and 5.6667; sinusoidal: one run
    assert "| TF NLL beyond training |" in md.splitlines()[0]
    rope_row = next(line for line in md.splitlines() if line.startswith("| demo/rope |"))
    assert "| 4.667 ± 1.414 |" in rope_row
    assert "| 4.667 |" in next(line for line in md.splitlines() if line.startswith("| demo/sinusoidal |"))
    assert "Teacher-forced NLL by target position" in md and "| config | encoding | 0-7 | 8-15 |" in md
    assert "| demo/rope | rope | 2.100 ± 0.141 | 3.700 ± 0.283 |" in md  # every k's buckets pooled, token-weighted
    assert "| demo/rope | rope | 0.700 ± 0.141 |" in md  # boundary p(EOS), k = 2
    assert (tmp_path / "after_teacher_forced.png").stat().st_size > 1000
    report = json.loads(after[".json"])
    rope = next(g for g in report["groups"] if g["label"] == "demo/rope")["teacher_forced"]
    assert rope["nll_beyond"]["mean"] == pytest.approx(14 / 3) and rope["training_length"] == 8
    assert [b["from"] for b in rope["by_position"]] == [0, 8] and rope["boundary_p_eos"]["2"]["n"] == 2
    assert "tf_nll_beyond" in after[".csv"].splitlines()[0]
    # everything else is as it was: without what the diagnostic added, the files are the same
    assert_same_without_the_diagnostic(before, after, report)


def assert_same_without_the_diagnostic(before: dict, after: dict, report: dict) -> None:
    """Without what the teacher-forced diagnostic added, compare.py's files are as they were."""
    md = after[".md"]
    chunks = md.split("\n\n")
    drop = {i for i, c in enumerate(chunks) if c.startswith("Teacher-forced")}
    assert len(drop) == 2  # NLL by position, boundary p(EOS); each followed by its table
    chunks = [c for i, c in enumerate(chunks) if i not in drop | {i + 1 for i in drop}]
    column = [c.strip() for c in md.splitlines()[0].strip("|").split("|")].index("TF NLL beyond training")

    def drop_cell(line: str) -> str:
        cells = line.strip("|").split("|")
        del cells[column]
        return "|" + "|".join(cells) + "|"

    chunks[0] = "\n".join(drop_cell(line) for line in chunks[0].splitlines())
    chunks = [
        "\n".join(line for line in c.splitlines() if not line.startswith("TF NLL beyond training:")) for c in chunks
    ]
    assert "\n\n".join(chunks) == before[".md"].rstrip("\n")
    old_rows, new_rows = (list(csv.DictReader(io.StringIO(x[".csv"]))) for x in (before, after))
    assert [{k: v for k, v in r.items() if not k.startswith("tf_")} for r in new_rows] == old_rows
    for g in report["groups"]:
        g.pop("teacher_forced")
    assert report == json.loads(before[".json"])
