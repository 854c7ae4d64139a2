#!/usr/bin/env python
"""Backfill test/source_lengths.txt into archived run folders (results/...), verified per run.

test.py writes <run>/test/source_lengths.txt: line i = test source i's length in subword tokens
(`Translation.source_length`, what scores.json's by_source_length uses). For runs archived
without it: read the test split as test.py does and check its references against
test/references.txt; rebuild the tokenizer as train.py does (`load_or_train_tokenizer` on the
training split, in a temporary folder, once per corpus + tokenizer setting); take each length
as evaluation/translate.py does. A run is verified when `score_by_length` over the archived
hypotheses reproduces by_source_length exactly (every field of every bucket), likewise
longer_than_training, and each concat row's mean_source_tokens (joined k-inputs). Only then is
the file written; nothing else in the run folder changes. (A length off by a little within its
bucket would go unseen by the buckets; the concat means bound the total.)

  .venv/bin/python tools/backfill_source_lengths.py results/demo/* results/length/* results/report/length/*
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from data.concat import concat_groups, join_pairs  # noqa: E402
from data.readers import corpus_fingerprint, normalize_text, read_corpus  # noqa: E402
from evaluation.test_set import _LINE_BREAKS, longest_training_source, read_config_split  # noqa: E402
from settings.config import load_config  # noqa: E402
from tokenizer import load_or_train_tokenizer  # noqa: E402
from utils import run_files  # noqa: E402
from utils.metrics import score_by_length, score_subset  # noqa: E402
from utils.stored_files import read_text, stored_exists  # noqa: E402

_tokenizers: dict[str, object] = {}
FILES = (run_files.HYPOTHESES, run_files.REFERENCES)


def read_lines(path: Path) -> list[str]:
    """The lines of a file written by test.py's write_lines ('\\n' after every entry), in any stored form."""
    text = read_text(path) or ""
    return text[:-1].split("\n") if text else []


def run_tokenizer(cfg):
    """The run's BPE, trained as train.py trains it (same function, same training split); cached."""
    key = json.dumps(
        {"corpus": corpus_fingerprint(cfg.data), "tokenizer": vars(cfg.tokenizer)}, sort_keys=True, default=str
    )
    if key not in _tokenizers:
        with tempfile.TemporaryDirectory() as scratch:  # the run folder gets no tokenizer.json
            _tokenizers[key] = load_or_train_tokenizer(
                cfg.tokenizer,
                lambda: read_corpus(cfg.data)["train"],
                Path(scratch),
                lambda msg: print(f"  {msg}", flush=True),
            )
    return _tokenizers[key]


def lengths_of(tokenizer, sources: list[str]) -> list[int]:
    """Source lengths exactly as evaluation/translate.py's translate() records them."""
    return [len(ids) for ids in tokenizer.encode_src_batch([normalize_text(s) for s in sources])]


def backfill(run: Path) -> str:
    """Verify one run and write its test/source_lengths.txt; the one-line outcome."""
    cfg = load_config(run / run_files.CONFIG)
    scores = json.loads(read_text(run / "test" / run_files.SCORES))
    if scores.get("split", "test") != "test":
        return f"MISMATCH: scores.json is for split {scores.get('split')!r}, not the config's test split"
    pairs, documents = read_config_split(cfg.data, "test")
    n = scores["num_sentences"]
    refs, hyps, archived_refs = [t for _, t in pairs], *(read_lines(run / "test" / f) for f in FILES)
    if not len(pairs) == len(hyps) == len(archived_refs) == n:
        return f"MISMATCH: {len(pairs)} pairs, {len(hyps)} hypotheses, {len(archived_refs)} references, {n} scored"
    bad = [i for i, (r, a) in enumerate(zip(refs, archived_refs)) if r.translate(_LINE_BREAKS) != a]
    if bad:
        return f"MISMATCH: {len(bad)} references differ from test/references.txt (first: line {bad[0] + 1})"
    tokenizer = run_tokenizer(cfg)
    lengths = lengths_of(tokenizer, [s for s, _ in pairs])
    buckets = score_by_length(hyps, refs, lengths, cfg.evaluation.length_buckets)
    if buckets != scores["by_source_length"]:
        diff = [
            (b["bucket"], {k: (b[k], a.get(k)) for k in b if b[k] != a.get(k)})
            for b, a in zip(buckets, scores["by_source_length"])
            if b != a
        ]
        return f"MISMATCH by_source_length (recomputed, archived): {diff or 'bucket lists differ'}"
    cap = longest_training_source(cfg.data)
    if cap is not None or "longer_than_training" in scores:
        longer = (
            None if cap is None else {"train_max_src_len": cap, **score_subset(hyps, refs, [x > cap for x in lengths])}
        )
        if longer != scores.get("longer_than_training"):
            return f"MISMATCH longer_than_training: recomputed {longer}, archived {scores.get('longer_than_training')}"
    for row in scores.get("concat", []):
        joined = join_pairs(pairs, concat_groups(len(pairs), row["k"], documents, cfg.evaluation.concat_seed))
        k_lengths = lengths_of(tokenizer, [s for s, _ in joined])
        mean = round(sum(k_lengths) / max(1, len(k_lengths)), 2)
        if (len(joined), mean) != (row["num_inputs"], row["mean_source_tokens"]):
            return (
                f"MISMATCH concat k={row['k']}: recomputed {len(joined)} inputs, {mean} mean source tokens; "
                f"archived {row['num_inputs']}, {row['mean_source_tokens']}"
            )
    out = run / "test" / run_files.SOURCE_LENGTHS
    if stored_exists(out):  # already there (archived as source_lengths.txt.cols.xz): one form only
        return "has test/source_lengths.txt already: left alone"
    out.write_text("".join(f"{x}\n" for x in lengths), encoding="utf-8", newline="\n")
    extra = f", longer_than_training n={scores['longer_than_training']['num_sentences']}" if cap is not None else ""
    return (
        f"verified ({len(buckets)} buckets{extra}, {len(scores.get('concat', []))} concat means), "
        f"written test/source_lengths.txt ({len(lengths)} lines)"
    )


def main(argv: list[str]) -> int:
    runs = [Path(a).resolve() for a in argv]
    if not runs:
        print(__doc__)
        return 2
    os.chdir(ROOT)  # configs name the corpus relative to the repository root
    start, failed = time.time(), 0
    for run in runs:
        t0 = time.time()
        try:
            outcome = backfill(run)
        except Exception as e:  # one run's problem is reported, the others still run
            outcome = f"ERROR: {type(e).__name__}: {e}".splitlines()[0]
        failed += not outcome.startswith("verified")
        print(f"{os.path.relpath(run, ROOT)}: {outcome} [{time.time() - t0:.1f}s]", flush=True)
    print(f"{len(runs) - failed} of {len(runs)} runs verified and written, {failed} not; {time.time() - start:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
