"""Test sets are scored whole (evaluation/test_set.py), any file pair can be scored through test.py,
and the length protocol (--concat) scores the pairs it joins."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from helpers import tiny_model
from in_process import run_in_process as run

from data.concat import concat_groups, join_pairs
from data.parallel_text import read_line_aligned_documents as read_pairs_with_documents
from settings.config import ExperimentConfig

FIX = Path(__file__).parents[1] / "fixtures"
XML_SRC, XML_REF = FIX / "IWSLT17.TED.dev2010.fr-en.fr.xml", FIX / "IWSLT17.TED.dev2010.fr-en.en.xml"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# ----------------------------------------------------------------------------- whole test sets


def test_evaluate_keeps_every_pair_and_counts_truncations(tmp_path: Path):
    """An XML test set with an empty segment and sources longer than the model's 12 positions:
    one hypothesis per pair, the long ones truncated and counted, per k as well."""
    from decoding.backend import HarnessDecoder
    from evaluation.test_set import evaluate
    from tokenizer import BPETokenizer

    pairs, docs = read_pairs_with_documents(XML_SRC, XML_REF)
    pairs = [*pairs, ("", "Nothing."), ("Le paludisme tue encore beaucoup de gens. " * 6, "Malaria. " * 6)]
    docs = [*docs, "9", "9"]
    tokenizer = BPETokenizer.train([t for p in pairs for t in p] * 5, vocab_size=120)
    model = tiny_model("learnable", vocab=tokenizer.src_vocab_size, layers=1, pad_id=tokenizer.pad_id, max_positions=12)
    cfg = ExperimentConfig()
    cfg.decoding.beam_size, cfg.decoding.max_len_b = 2, 3
    scores = evaluate(HarnessDecoder(model), tokenizer, pairs, docs, cfg, "cpu", tmp_path, concat=[1, 2])
    src_lens = [len(x) for x in tokenizer.encode_src_batch([s for s, _ in pairs])]
    assert scores["num_sentences"] == len(pairs) == len(lines(tmp_path / "hypotheses.txt"))
    assert scores["truncated_sources"] == sum(n > 12 for n in src_lens) > 0
    assert lines(tmp_path / "hypotheses.txt")[5] == ""  # the empty source
    k2 = scores["concat"][1]
    assert k2["k"] == 2 and k2["num_inputs"] == len(lines(tmp_path / "concat" / "k2" / "hypotheses.txt")) == 4
    assert k2["truncated_sources"] >= scores["truncated_sources"]
    assert scores["concat_order"] == "documents"


def test_test_py_scores_sources_longer_than_max_len_whole(trained_run: Path, tmp_path: Path):
    """data.max_len filters training pairs only: a test source longer than it is still scored."""
    from settings.config import load_config
    from tokenizer import BPETokenizer

    cfg = load_config(trained_run / "config.yaml")
    long_src = " ".join(["Où est la gare ? Je ne sais pas."] * 30)
    assert len(BPETokenizer.load(trained_run).encode_src_batch([long_src])[0]) > cfg.data.max_len
    src, ref = tmp_path / "in.fr", tmp_path / "in.en"
    src.write_text(f"Bonjour.\n{long_src}\nMerci.\n")
    ref.write_text("Hello.\n" + " ".join(["Where is the station? I do not know."] * 30) + "\nThanks.\n")
    out = tmp_path / "out"
    proc = run(["test.py", "--run", str(trained_run), "--src", str(src), "--ref", str(ref), "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = json.loads((out / "scores.json").read_text())
    assert scores["num_sentences"] == 3 == len(lines(out / "hypotheses.txt")) == len(lines(out / "sources.txt"))
    assert scores["truncated_sources"] == 0  # RoPE represents any length: nothing cut
    assert 0 < scores["length_ratio"] and scores["hyp_len"] > 0


def test_test_py_scores_a_text_file_pair_and_concatenates_by_hand(trained_run: Path, tmp_path: Path):
    from data.readers import read_corpus
    from settings.config import load_config

    train_pair = read_corpus(load_config(trained_run / "config.yaml").data)["train"][0]
    src, ref = tmp_path / "in.fr", tmp_path / "in.en"
    src_lines = ["Bonjour.", "Merci beaucoup.", "Où est la gare ?", "", "Je t'aime.", train_pair[0]]
    ref_lines = ["Hello.", "Thank you very much.", "Where is the station?", "", "I love you.", train_pair[1]]
    src.write_text("\n".join(src_lines) + "\n")
    ref.write_text("\n".join(ref_lines) + "\n")
    out = tmp_path / "out"
    proc = run(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--src",
            str(src),
            "--ref",
            str(ref),
            "--concat",
            "1",
            "2",
            "4",
            "--set",
            "evaluation.concat_seed=3",
            "--output",
            str(out),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = json.loads((out / "scores.json").read_text())
    assert scores["num_sentences"] == 6 and len(lines(out / "hypotheses.txt")) == 6
    overlap = scores["overlap_with_train"]  # measured against the run's own training pairs
    assert overlap["measured"] and overlap["pairs"] == 6
    assert overlap["pair"]["count"] >= 1 and overlap["source"]["count"] >= 1  # the planted training pair
    assert [r["k"] for r in scores["concat"]] == [1, 2, 4]
    for k in (1, 2, 4):
        groups = concat_groups(6, k, None, seed=3)
        want = join_pairs(list(zip(src_lines, ref_lines)), groups)
        folder = out / "concat" / f"k{k}"
        assert lines(folder / "sources.txt") == [s for s, _ in want]
        assert lines(folder / "references.txt") == [r for _, r in want]
        assert len(lines(folder / "hypotheses.txt")) == len(want)
    # k = 1 reuses the sentence-level translations, in test order
    assert lines(out / "concat" / "k1" / "hypotheses.txt") == lines(out / "hypotheses.txt")
    # each source's length in subword tokens, line by line (what compare.py's bucket findings read)
    lengths = [int(n) for n in lines(out / "source_lengths.txt")]
    assert len(lengths) == 6 and lengths[3] == 0 and min(lengths[:3]) > 0
    assert sum(b["num_sentences"] for b in scores["by_source_length"]) == sum(n >= 1 for n in lengths)


def test_test_py_scores_wit3_xml_and_keeps_documents(trained_run: Path, tmp_path: Path):
    out = tmp_path / "xml"
    proc = run(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--src",
            str(XML_SRC),
            "--ref",
            str(XML_REF),
            "--concat",
            "2",
            "--output",
            str(out),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = json.loads((out / "scores.json").read_text())
    assert scores["num_sentences"] == 5 and scores["test_set"]["src"] == str(XML_SRC)
    assert scores["concat_order"] == "documents"
    pairs, _ = read_pairs_with_documents(XML_SRC, XML_REF)
    # doc 535 holds 3 segments, doc 531 two: k=2 gives [1,2], [3], [1,2] and never joins across talks
    assert lines(out / "concat" / "k2" / "sources.txt") == [
        f"{pairs[0][0]} {pairs[1][0]}",
        pairs[2][0],
        f"{pairs[3][0]} {pairs[4][0]}",
    ]
    assert scores["concat"][0]["short_groups"] == 1


def test_test_py_file_errors_are_one_line(trained_run: Path, tmp_path: Path):
    only_src = run(["test.py", "--run", str(trained_run), "--src", str(XML_SRC)])
    assert only_src.returncode == 2 and "--ref" in only_src.stderr and "Traceback" not in only_src.stderr
    missing = run(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--src",
            str(tmp_path / "nope.fr"),
            "--ref",
            str(XML_REF),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert missing.returncode == 2 and "nope.fr" in missing.stderr and "Traceback" not in missing.stderr
    folder = run(
        [
            "test.py",
            "--run",
            str(trained_run),
            "--src",
            str(tmp_path),
            "--ref",
            str(XML_REF),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert folder.returncode == 2 and "is a folder" in folder.stderr and "Traceback" not in folder.stderr
    both = run(["test.py", "--run", str(trained_run), "--src", str(XML_SRC), "--ref", str(XML_REF), "--split", "valid"])
    assert both.returncode == 2 and "--split" in both.stderr
    zero = run(["test.py", "--run", str(trained_run), "--concat", "0", "--output", str(tmp_path / "zero")])
    assert zero.returncode == 2 and "--concat" in zero.stderr and not (tmp_path / "zero").exists()  # checked first
    blocked = tmp_path / "file"
    blocked.write_text("a file where a folder should go")
    unwritable = run(["test.py", "--run", str(trained_run), "--output", str(blocked / "sub")])
    assert unwritable.returncode == 2 and "output" in unwritable.stderr and "Traceback" not in unwritable.stderr


def test_written_files_hold_one_line_per_entry_whatever_the_text(tmp_path: Path):
    from evaluation.test_set import write_lines

    entries = ["a\nb", "c\rd", "e\u2028f", "", "g\x85h\x0ci"]
    write_lines(tmp_path, hypotheses=entries)
    text = (tmp_path / "hypotheses.txt").read_text(encoding="utf-8")
    assert text.splitlines() == ["a b", "c d", "e f", "", "g h i"] and text.count("\n") == 5


def test_shape_checkpoints_from_before_the_inference_shift_are_scored_as_trained(tmp_path: Path):
    """A SHAPE checkpoint whose config predates `shape_inference_shift` was evaluated unshifted:
    loading it keeps that; a current one gets the authors' shift K."""
    from artifacts.checkpoint import RunMeta
    from artifacts.loading import load_model
    from models.build import build_model
    from settings.config import load_config, to_dict
    from tokenizer import BPETokenizer

    tok = BPETokenizer.train(["Bonjour le monde.", "Hello world."] * 5, vocab_size=60)
    cfg = load_config(
        "configs/length/shape.yaml",
        [
            "model.d_model=16",
            "model.num_heads=2",
            "model.ffn_dim=32",
            "model.num_encoder_layers=1",
            "model.num_decoder_layers=1",
        ],
    )
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id)
    for name, drop_key in (("old.pt", True), ("new.pt", False)):
        raw = to_dict(cfg)
        if drop_key:  # as written then: the flat option bag of every encoding, without the inference shift
            raw["model"]["positional"] = {
                "name": "shape",
                "max_positions": 1024,
                "rope_theta": 10000.0,
                "shape_max_shift": 24,
                "clip_distance": 16,
                "cross_attention": False,
            }
        torch.save({"model": model.state_dict(), "meta": RunMeta(raw, tok.state_dict()).state_dict()}, tmp_path / name)
    old = load_model(tmp_path / "old.pt").model
    new = load_model(tmp_path / "new.pt").model
    assert old.encoder_pe.inference_shift == old.decoder_pe.inference_shift == 0
    assert old.encoder_pe.max_shift == 24
    assert new.encoder_pe.inference_shift == cfg.model.positional.options["max_shift"] == 24


def test_longer_than_training_counts_joined_training_pairs():
    from evaluation.test_set import longest_training_source

    cfg = ExperimentConfig()
    assert longest_training_source(cfg.data) is None
    cfg.data.train_max_src_len = 12
    assert longest_training_source(cfg.data) == 12
    cfg.data.train_concat.prob, cfg.data.train_concat.max_k = 0.5, 4
    assert longest_training_source(cfg.data) == 48
    cfg.data.max_len = 30
    assert longest_training_source(cfg.data) == 30
