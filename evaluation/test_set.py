"""Scoring a test set whole: translate every pair, score, break down by source length, and the
length-extrapolation protocol (inputs of k consecutive pairs joined, for each k).

Every pair of the set gets exactly one hypothesis line: an empty source gives an empty
hypothesis, a source longer than the model can represent is truncated and counted
(`truncated_sources` in scores.json), nothing is dropped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional, Sequence

from data.concat import concat_groups, join_pairs
from data.readers import normalize_pairs
from decoding.backend import DecodingBackend
from evaluation.translate import Translation, translate
from utils.files import atomic_write_text
from utils.metrics import METRICS, metric_line, score_by_length, score_subset, score_translations
from utils.run_log import log, make_writable_folder

Pair = tuple[str, str]


def read_config_split(data_cfg, split: str) -> tuple[list[Pair], Optional[list[str]]]:
    """A config's valid or test split, whole, with document ids where the files have them (WIT3 XML)."""
    from data.readers import read_corpus

    if data_cfg.source == "parallel_text":  # the same reader as training, keeping the documents
        return read_file_pair(getattr(data_cfg, split), data_cfg.src_lang, data_cfg.tgt_lang)
    return read_corpus(data_cfg)[split], None


def read_file_pair(spec: dict, src_lang: str, tgt_lang: str) -> tuple[list[Pair], Optional[list[str]]]:
    """Any split spec ({src, tgt} files: plain, .gz, raw WIT3 tags or XML; or {tsv}), normalised
    like a corpus, with document ids where the files have documents."""
    from data.parallel_text import read_split_documents

    pairs, docs = read_split_documents(spec, src_lang, tgt_lang)
    return normalize_pairs(pairs), docs


def overlap_with_training(data_cfg, pairs: list[Pair]) -> dict:
    """How many of `pairs` have their normalised source/target/pair in the run's training corpus
    (the same measure as data_report.json); best effort: says why when the corpus cannot be read."""
    from data.overlap import overlap_report, overlap_summary
    from data.parallel_text import CorpusError
    from data.readers import read_corpus

    try:
        train = read_corpus(data_cfg)["train"]
    except (CorpusError, OSError) as e:
        log(f"overlap with the training corpus not measured: {e}".splitlines()[0])
        return {"measured": False, "reason": str(e).splitlines()[0]}
    report = overlap_report({"train": train, "test": pairs})
    log(overlap_summary(report, "test").replace("data: test", "data: this test set"))
    return {"measured": True, **report["test"]}


# Every character str.splitlines() breaks on: inside an entry each becomes a space.
_LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def write_lines(folder: Path, **files: Sequence[str]) -> None:
    """One line per entry, so that line i is always pair i (for `wc -l` and `splitlines()` alike);
    each file written whole or not at all (utils/files.py)."""
    for name, lines in files.items():
        atomic_write_text(folder / f"{name}.txt", "".join(line.translate(_LINE_BREAKS) + "\n" for line in lines))


def check_writable(folder: Path) -> None:
    """Fail before hours of decoding, not after: the output folder must be creatable and writable."""
    try:
        make_writable_folder(folder)
    except OSError as e:
        raise FileExistsError(
            f"cannot write to the output folder {folder} ({e.strerror}); pick another with --output"
        ) from e


def longest_training_source(data_cfg) -> Optional[int]:
    """The longest source (subword tokens) a run can have trained on when its training sources were
    capped (`train_max_src_len`), joined pairs (`train_concat`) included; None when uncapped."""
    cap = data_cfg.train_max_src_len
    if cap is None:
        return None
    if data_cfg.train_concat.prob > 0:
        return min(data_cfg.max_len, cap * data_cfg.train_concat.max_k)
    return cap


def _translate(decoder, tokenizer, sources: list[str], settings, device, what: str) -> tuple[list[Translation], float]:
    from tqdm import tqdm

    start = time.time()
    outputs = translate(
        decoder,
        tokenizer,
        sources,
        settings,
        device,
        progress=lambda b: tqdm(b, desc=what, unit="batch", mininterval=5),
    )
    return outputs, time.time() - start


def _truncations(outputs: list[Translation], what: str) -> int:
    n = sum(o.truncated_from is not None for o in outputs)
    if n:
        log(
            f"warning: {what}: {n} source(s) longer than the model can represent (model.positional."
            f"max_positions) were truncated to that limit (counted in scores.json: truncated_sources)"
        )
    return n


def evaluate(
    decoder: DecodingBackend,
    tokenizer,
    pairs: list[Pair],
    documents: Optional[list[str]],
    cfg,
    device,
    out_dir: Path,
    concat: Sequence[int] = (),
) -> dict:
    """Translate and score `pairs` whole; write sources/references/hypotheses and return the scores.
    With `concat`, also score inputs of k joined pairs for each k (under out_dir/concat/k<k>/)."""
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    settings = cfg.decoding
    log(
        f"translating {len(sources):,} sentences ({settings.strategy}, "
        f"beam {settings.beam_size if settings.strategy == 'beam' else 1})"
    )
    outputs, seconds = _translate(decoder, tokenizer, sources, settings, device, "translating")
    hyps = [o.text for o in outputs]
    scores = score_translations(hyps, references)
    scores.update(
        truncated_sources=_truncations(outputs, "test"),
        translate_seconds=round(seconds, 2),
        sentences_per_second=round(len(hyps) / max(seconds, 1e-9), 2),
    )
    lengths = [o.source_length for o in outputs]
    scores["by_source_length"] = score_by_length(hyps, references, lengths, cfg.evaluation.length_buckets)
    cap = longest_training_source(cfg.data)
    if cap is not None:
        longer = score_subset(hyps, references, [n > cap for n in lengths])
        scores["longer_than_training"] = {"train_max_src_len": cap, **longer}
    # each sentence's length, so that compare.py can test a length bucket sentence by sentence
    write_lines(
        out_dir, hypotheses=hyps, references=references, sources=sources, source_lengths=[str(n) for n in lengths]
    )
    if concat:
        scores["concat"] = [
            _score_concat(decoder, tokenizer, pairs, documents, cfg, device, out_dir, k, outputs)
            for k in sorted(set(concat))
        ]
        scores["concat_order"] = "documents" if documents is not None else f"seeded (seed {cfg.evaluation.concat_seed})"
    return scores


def protocol_groups(num_pairs: int, k: int, documents: Optional[list[str]], cfg) -> list[list[int]]:
    """The pairs joined into each input of the length protocol at k: one definition for the BLEU
    protocol and the teacher-forced diagnostic (evaluation/teacher_forced.py), so both score the
    same inputs."""
    return concat_groups(num_pairs, k, documents, cfg.evaluation.concat_seed)


def _score_concat(
    decoder: DecodingBackend,
    tokenizer,
    pairs: list[Pair],
    documents: Optional[list[str]],
    cfg,
    device,
    out_dir: Path,
    k: int,
    single: list[Translation],
) -> dict:
    """One k of the length protocol: join, translate (k = 1 reuses the sentence-level outputs), score."""
    groups = protocol_groups(len(pairs), k, documents, cfg)
    joined = join_pairs(pairs, groups)
    sources, references = [s for s, _ in joined], [t for _, t in joined]
    if k == 1:
        outputs, seconds = [single[g[0]] for g in groups], 0.0
    else:
        outputs, seconds = _translate(decoder, tokenizer, sources, cfg.decoding, device, f"k={k}")
    hyps = [o.text for o in outputs]
    s = score_translations(hyps, references)
    write_lines(out_dir / "concat" / f"k{k}", hypotheses=hyps, references=references, sources=sources)
    row = {
        "k": k,
        "num_inputs": len(joined),
        "short_groups": sum(len(g) < k for g in groups),
        **{m.name: s[m.name] for m in METRICS},
        **{key: s[key] for key in ("length_ratio", "hyp_len", "ref_len")},
        "truncated_sources": _truncations(outputs, f"k={k}"),
        "mean_source_tokens": round(sum(o.source_length for o in outputs) / max(1, len(outputs)), 2),
        "translate_seconds": round(seconds, 2),
    }
    log(
        f"k={k}: {metric_line(row)}  length ratio {row['length_ratio']:.3f} "
        f"({row['num_inputs']} inputs, {row['mean_source_tokens']} source tokens on average)"
    )
    return row
