"""Findings: what a comparison of runs supports, worded by one fixed rule, generated from the runs.

For every configuration against the baseline, on the test set, on each k of the length protocol
(k >= 2; k = 1 *is* the test set) and on each source-length bucket (where test.py recorded each
sentence's length, `test/source_lengths.txt`): the mean sacreBLEU difference over the seeds both
were run with, how many of those seeds it is ahead in, the paired bootstrap p of every seed
(sacreBLEU's own test), and one combined test over the seeds that resamples the same sentences for
every seed (evaluation/significance.py). Holm's correction runs over the rows of each table.

The rule that words a row: "ahead"/"behind" by the sign of the mean difference; "in every seed"
when each seed's difference has that sign, else "on average" (if significant) or "no consistent
difference"; "significant" when the Holm-corrected combined p is below ALPHA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from evaluation.run_stats import read_lines, test_folder
from evaluation.significance import DEFAULT_SEED, holm, paired_bootstrap_ratio, paired_bootstrap_seeds, sentence_stats
from evaluation.teacher_forced import BEYOND_FILE

ALPHA = 0.05
MIN_SENTENCES = 10  # fewer and resampling says nothing (one sentence: every resample is that sentence)
RULE = ("Finding, by one rule: ahead/behind by the sign of the mean difference; 'in every seed' when every "
        "seed's difference has that sign, else 'on average' (when significant) or 'no consistent difference'; "
        f"'significant' when the Holm-corrected p (all seeds) is below {ALPHA}.")


def format_p(p: Optional[float]) -> str:
    """A p-value to the digits its resampling supports (10,000 resamples: standard error <= 0.005)."""
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


class Outputs:
    """Per-sentence BLEU statistics of a run's test outputs (read once), with their references, and
    its per-input teacher-forced NLL beyond training (read once)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int], Optional[tuple[np.ndarray, list[str]]]] = {}
        self._beyond: dict[str, Optional[dict]] = {}

    def beyond(self, run: dict) -> Optional[dict[tuple[int, int], tuple[float, float]]]:
        key = str(test_folder(run))
        if key not in self._beyond:
            self._beyond[key] = nll_beyond(run)
        return self._beyond[key]

    def get(self, run: dict, k: int) -> Optional[tuple[np.ndarray, list[str]]]:
        """(stats, references) of the test set (k = 1) or of its k-inputs; None when not written."""
        key = (str(test_folder(run)), k)
        if key not in self._cache:
            folder = test_folder(run) / ("" if k == 1 else f"concat/k{k}")
            hyps, refs = read_lines(folder / "hypotheses.txt"), read_lines(folder / "references.txt")
            self._cache[key] = None if hyps is None or refs is None else (sentence_stats(hyps, refs), refs)
        return self._cache[key]


def source_lengths(run: dict) -> Optional[list[int]]:
    path = test_folder(run) / "source_lengths.txt"
    lines = read_lines(path)
    try:
        return None if lines is None else [int(x) for x in lines]
    except ValueError:
        raise ValueError(f"{path} is damaged (one length in subword tokens per line expected); test the run "
                         f"again or delete the file") from None


def nll_beyond(run: dict) -> Optional[dict[tuple[int, int], tuple[float, float]]]:
    """A run's teacher-forced NLL beyond its training length per input: {(k, input): (NLL sum,
    tokens)} (test.py's BEYOND_FILE), or None when it was not written."""
    lines = read_lines(test_folder(run) / BEYOND_FILE)
    if lines is None or len(lines) < 2:  # not written, or no token beyond (no training length recorded)
        return None
    try:
        return {(int(k), int(i)): (float(x), float(n)) for k, i, n, x in (line.split("\t") for line in lines[1:])}
    except ValueError:
        raise ValueError(f"{test_folder(run) / BEYOND_FILE} is damaged (k, input, tokens, NLL sum per line "
                         f"expected); test the run again or delete the file") from None


def training_length(run: dict) -> Optional[int]:
    """The decoder training length a run's teacher-forced figures were split at (None: unknown)."""
    return (run.get("teacher_forced") or {}).get("training_length")


def compare_nll(pairs: list[tuple[dict, dict]], outputs: Outputs, n_samples: int, seed: int) -> Optional[dict]:
    """Per-seed and combined paired bootstrap of the teacher-forced NLL beyond the training length,
    pooled over every k: the unit resampled is an input (of any k) that has such tokens in either
    run; the statistic the token-weighted mean NLL. Lower is better: `ahead` counts seeds with a
    lower NLL than the baseline's."""
    sums = [(outputs.beyond(run), outputs.beyond(base), run["seed"]) for run, base in pairs]
    keys = sorted({key for mine, theirs, _ in sums for key in (*mine, *theirs)})
    if not keys:
        return None

    def rows(values: dict) -> np.ndarray:
        return np.array([values.get(key, (0.0, 0.0)) for key in keys])  # [inputs, 2]

    systems, baselines = [rows(m) for m, _, _ in sums], [rows(t) for _, t, _ in sums]
    seeds = [s for _, _, s in sums]
    if len(keys) < MIN_SENTENCES:
        return {"seeds": seeds, "num_sentences": len(keys), "mean_difference": None, "ahead": None,
                "behind": None, "p_value": None, "per_seed": [], "lower_is_better": True}
    combined = paired_bootstrap_ratio(systems, baselines, n_samples, seed)
    per_seed = [paired_bootstrap_ratio([m], [b], n_samples, seed) for m, b in zip(systems, baselines)]
    diffs = combined.per_seed
    return {"seeds": seeds, "num_sentences": len(keys), "mean_difference": combined.difference,
            "ahead": sum(d < 0 for d in diffs), "behind": sum(d > 0 for d in diffs), "p_value": combined.p_value,
            "per_seed": [{"seed": s, "difference": d, "p_value": r.p_value} for s, d, r in zip(seeds, diffs, per_seed)],
            "lower_is_better": True}


def _pairs(group: dict, baseline: dict, has: Callable[[dict], bool]) -> list[tuple[dict, dict]]:
    """(run, baseline run) of every seed both configurations ran with outputs for this comparison,
    one pair per seed (a seed run twice counts once: its first run)."""
    base: dict = {}
    for r in baseline["runs"]:
        if r["seed"] is not None and has(r):
            base.setdefault(r["seed"], r)
    mine: dict = {}
    for r in group["runs"]:
        if r["seed"] in base and has(r):
            mine.setdefault(r["seed"], r)
    return [(r, base[seed]) for seed, r in mine.items()]


def compare_pair(pairs: list[tuple[dict, dict]], outputs: Outputs, k: int, n_samples: int, seed: int,
                 bucket: Optional[tuple[int, Optional[int]]] = None) -> Optional[dict]:
    """Per-seed and combined paired bootstrap of a configuration against the baseline."""
    systems, baselines, subsets, seeds = [], [], [], []
    for run, base in pairs:
        (mine, refs), (theirs, base_refs) = outputs.get(run, k), outputs.get(base, k)
        if refs != base_refs:
            raise ValueError(f"{run['run']} and {base['run']} were scored on different references "
                             f"({'test set' if k == 1 else f'k={k}'}): they cannot be compared")
        subset = None
        if bucket is not None:
            lengths = source_lengths(run)
            if lengths != source_lengths(base) or lengths is None or len(lengths) != len(refs):
                continue  # no (or differing) per-sentence lengths: this bucket is not tested for the pair
            lo, hi = bucket
            subset = np.array([n >= lo and (hi is None or n <= hi) for n in lengths])
        systems.append(mine)
        baselines.append(theirs)
        subsets.append(subset)
        seeds.append(run["seed"])
    if not seeds:
        return None
    if bucket is not None:  # one subset for all seeds (the same sources): select before testing
        systems = [s[m] for s, m in zip(systems, subsets)]
        baselines = [b[m] for b, m in zip(baselines, subsets)]
    n = len(systems[0])
    if n < MIN_SENTENCES:
        return {"seeds": seeds, "num_sentences": n, "mean_difference": None, "ahead": None, "behind": None,
                "p_value": None, "per_seed": []}
    combined = paired_bootstrap_seeds(systems, baselines, n_samples, seed)
    per_seed = [paired_bootstrap_seeds([s], [b], n_samples, seed) for s, b in zip(systems, baselines)]
    diffs = combined.per_seed
    return {"seeds": seeds, "num_sentences": n, "mean_difference": combined.difference, "ahead": sum(d > 0 for d in diffs),
            "behind": sum(d < 0 for d in diffs), "p_value": combined.p_value,
            "per_seed": [{"seed": s, "difference": d, "p_value": r.p_value}
                         for s, d, r in zip(seeds, diffs, per_seed)]}


def verdict(row: dict) -> str:
    if row["p_value"] is None:
        return f"not tested (fewer than {MIN_SENTENCES} sentences)"
    m, diff = len(row["seeds"]), row["mean_difference"]
    better = -diff if row.get("lower_is_better") else diff  # NLL: lower is ahead
    direction = "ahead" if better > 0 else "behind" if better < 0 else "level"
    unanimous = better != 0 and (row["ahead"] if better > 0 else row["behind"]) == m
    significant = row["p_holm"] < ALPHA
    seeds = "the one seed" if m == 1 else f"every seed ({m}/{m})"
    if unanimous:
        return f"{direction} in {seeds}, {'significant' if significant else 'not significant'}"
    if significant:
        return f"{direction} on average ({row['ahead']}/{m} seeds ahead), significant"
    return f"no consistent difference ({row['ahead']}/{m} seeds ahead), not significant"


def _table(name: str, title: str, rows: list[dict], metric: str = "sacreBLEU") -> dict:
    adjusted = holm([r["p_value"] for r in rows])
    for r, p in zip(rows, adjusted):
        r["p_holm"] = p
        r["finding"] = verdict(r)
    table = {"name": name, "title": title, "family_size": sum(r["p_value"] is not None for r in rows), "rows": rows}
    return table if metric == "sacreBLEU" else {**table, "metric": metric}


def compute_findings(groups: list[dict], baseline: dict, n_samples: int = 10000, seed: int = DEFAULT_SEED) -> dict:
    """Every configuration against `baseline` (compare.py's groups), as tables of findings."""
    outputs = Outputs()
    others = [g for g in groups if g is not baseline]
    ks = sorted({k for g in groups for r in g["runs"] for k in (r.get("concat") or {}) if k > 1})
    buckets = next((r["by_source_length"] for r in baseline["runs"] if r.get("by_source_length")), None) or []

    def rows(comparisons: list[tuple[str, int, Optional[tuple]]]) -> list[dict]:
        out = []
        for g in others:
            for label, k, bucket in comparisons:
                pairs = _pairs(g, baseline, lambda r: outputs.get(r, k) is not None)
                result = compare_pair(pairs, outputs, k, n_samples, seed, bucket) if pairs else None
                if result is not None:
                    out.append({"config": g["label"], "encoding": g["encoding"], "compared_on": label, **result})
        return out

    tables = [_table("test", "test set", rows([("test set", 1, None)]))]
    if ks:
        tables.append(_table("concat", "inputs of k test pairs joined",
                             rows([(f"k={k}", k, None) for k in ks])))
    if buckets:
        tables.append(_table("buckets", "test set by source length (subword tokens)",
                             rows([(f"{b['bucket']} tokens", 1, (b["min_len"], b["max_len"])) for b in buckets])))
    nll_rows = []
    for g in others:  # the encoding itself, whatever the search does: the references' NLL beyond training
        # Only against a baseline run that was trained on the same lengths: "beyond" is then the same
        # tokens of the same inputs (a run trained on joined pairs has other lengths).
        lengths = {r["seed"]: training_length(r) for r in baseline["runs"]}
        pairs = _pairs(g, baseline, lambda r: outputs.beyond(r) is not None
                       and training_length(r) is not None and training_length(r) == lengths.get(r["seed"]))
        result = compare_nll(pairs, outputs, n_samples, seed) if pairs else None
        if result is not None:
            nll_rows.append({"config": g["label"], "encoding": g["encoding"],
                             "compared_on": "teacher-forced NLL beyond training, all k", **result})
    tables.append(_table("teacher_forced", "teacher-forced NLL (EOS renormalised out) at target positions beyond "
                         "the training length, inputs of every k", nll_rows, metric="NLL"))
    return {"baseline": baseline["label"], "metric": "sacreBLEU", "alpha": ALPHA, "correction": "holm, within each table",
            "test": "paired bootstrap resampling (sacreBLEU's: per seed equal to sacrebleu --paired-bs); all seeds: "
                    "the same resampled sentences for every seed, statistic the mean difference over seeds",
            "n_samples": n_samples, "bootstrap_seed": seed, "rule": RULE,
            "tables": [t for t in tables if t["rows"]]}


def find_row(findings: dict, table: str, config: str, compared_on: str) -> Optional[dict]:
    for t in findings["tables"]:
        if t["name"] == table:
            return next((r for r in t["rows"] if r["config"] == config and r["compared_on"] == compared_on), None)
    return None


def findings_markdown(findings: dict) -> str:
    """The findings as markdown: one table per family, then how they were computed."""
    parts = []
    for t in findings["tables"]:
        metric = t.get("metric", "sacreBLEU")
        lower = " (lower is better)" if metric == "NLL" else ""
        lines = [f"Against `{findings['baseline']}`, {t['title']}:", "",
                 f"| config | compared on | Δ {metric} (mean over seeds){lower} | seeds ahead | p per seed | "
                 "p, all seeds | p, Holm | finding |", "|---|---|---|---|---|---|---|---|"]
        for r in t["rows"]:
            per_seed = ", ".join(f"{s['seed']}: {format_p(s['p_value'])}" for s in r["per_seed"])
            diff = "–" if r["mean_difference"] is None else \
                f"{r['mean_difference']:+.3f}" if metric == "NLL" else f"{r['mean_difference']:+.2f}"
            ahead = "–" if r["ahead"] is None else f"{r['ahead']}/{len(r['seeds'])}"
            lines.append(f"| {r['config']} | {r['compared_on']} (n={r['num_sentences']}) | {diff} | {ahead} | "
                         f"{per_seed or '–'} | {format_p(r['p_value'])} | {format_p(r['p_holm'])} | {r['finding']} |")
        parts.append("\n".join(lines))
    parts.append(f"p: paired bootstrap resampling of sacreBLEU ({findings['n_samples']:,} resamples, seed "
                 f"{findings['bootstrap_seed']}); per seed it is sacreBLEU's own test (`sacrebleu --paired-bs`); "
                 f"'all seeds' resamples the same sentences for every seed and tests the mean difference over "
                 f"the seeds both configurations ran with. Holm's correction runs over the rows of each table. "
                 + ("The NLL table resamples inputs (of every k) the same way: the statistic is the token-weighted "
                    "mean NLL of the reference tokens beyond the training length, and ahead means lower. "
                    if any(t.get("metric") == "NLL" for t in findings["tables"]) else "")
                 + findings["rule"])
    return "\n\n".join(parts)
