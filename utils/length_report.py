"""The length-extrapolation table of compare.py: for each k (inputs of k consecutive test pairs
joined, written by `test.py --concat`), each configuration's test sacreBLEU and hypothesis/
reference length ratio as mean ± std over its seeds, how many same-seed runs beat the baseline,
and a paired bootstrap p-value against the baseline (first seed of each, on the k-inputs).

Input: compare.py's groups (one per configuration, with its runs); each run row carries
`concat` = {k: scores.json's row for k} and its folder.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional

from utils.metrics import paired_bootstrap


def _lines(path: Path) -> Optional[list[str]]:
    return path.read_text(encoding="utf-8").splitlines() if path.is_file() else None


def _mean_std(values: list) -> tuple[Optional[float], Optional[float]]:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def concat_ks(groups: list[dict]) -> list[int]:
    """Every k scored by at least one run, ascending."""
    return sorted({k for g in groups for r in g["runs"] for k in (r.get("concat") or {})})


def add_concat_stats(groups: list[dict], baseline: dict, n_samples: int = 1000, significance: bool = True) -> None:
    """Set g["concat"] = {k: {bleu, bleu_std, ratio, ratio_std, n, seeds_above, p_value}} for every group."""
    ks = concat_ks(groups)
    for g in groups:
        g["concat"] = {}
        for k in ks:
            rows = [r["concat"][k] for r in g["runs"] if k in (r.get("concat") or {})]
            bleu, bleu_std = _mean_std([x["sacrebleu"] for x in rows])
            ratio, ratio_std = _mean_std([x["length_ratio"] for x in rows])
            g["concat"][k] = {"bleu": bleu, "bleu_std": bleu_std, "ratio": ratio, "ratio_std": ratio_std,
                              "n": len(rows), "seeds_above": None, "p_value": None}
    for k in ks:
        base = {r["seed"]: r["concat"][k]["sacrebleu"] for r in baseline["runs"] if k in (r.get("concat") or {})}
        for g in groups:
            if g is baseline:
                continue
            pairs = [(r["concat"][k]["sacrebleu"], base[r["seed"]]) for r in g["runs"]
                     if k in (r.get("concat") or {}) and r["seed"] in base]
            g["concat"][k]["seeds_above"] = [sum(a > b for a, b in pairs), len(pairs)] if pairs else None
        if significance:
            _add_p_values(groups, baseline, k, n_samples)


def _add_p_values(groups: list[dict], baseline: dict, k: int, n_samples: int) -> None:
    """Paired bootstrap on the k-inputs: each group's first scored run against the baseline's."""
    def outputs(g: dict) -> Optional[tuple[list[str], list[str]]]:
        run = next((r for r in g["runs"] if k in (r.get("concat") or {})), None)
        if run is None:
            return None
        folder = Path(run["run"]) / "test" / "concat" / f"k{k}"
        hyps, refs = _lines(folder / "hypotheses.txt"), _lines(folder / "references.txt")
        return (hyps, refs) if hyps is not None and refs is not None else None

    base = outputs(baseline)
    if base is None:
        return
    others = [(g, outputs(g)) for g in groups if g is not baseline]
    others = [(g, o) for g, o in others if o is not None and o[1] == base[1]]  # same k-inputs only
    if not others:
        return
    p_values = paired_bootstrap([(baseline["label"], base[0]), *((g["label"], o[0]) for g, o in others)],
                                base[1], n_samples)
    for (g, _), p in zip(others, p_values[1:]):
        g["concat"][k]["p_value"] = p


def _cell(mean: Optional[float], std: Optional[float], digits: int) -> str:
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def concat_tables(groups: list[dict], baseline: dict, n_samples: int = 1000) -> str:
    """Markdown: sacreBLEU per k, length ratio per k, and the comparison with the baseline per k."""
    ks = concat_ks(groups)
    if not ks:
        return ""
    head = "| config | encoding | " + " | ".join(f"k={k}" for k in ks) + " |\n|---|---|" + "|".join("---" for _ in ks) + "|"

    def table(render) -> str:
        rows = [f"| {g['label']} | {g['encoding']} | " + " | ".join(render(g, g["concat"][k]) for k in ks) + " |"
                for g in groups]
        return head + "\n" + "\n".join(rows)

    def against(g: dict, c: dict) -> str:
        if g is baseline:
            return "baseline"
        wins = f"{c['seeds_above'][0]}/{c['seeds_above'][1]}" if c["seeds_above"] else "–"
        return wins + (f", p={c['p_value']:.3f}" if c["p_value"] is not None else "")

    return "\n\n".join([
        "Length extrapolation: test sacreBLEU on inputs of k consecutive test pairs joined "
        "(mean ± std over seeds):\n\n" + table(lambda g, c: _cell(c["bleu"], c["bleu_std"], 2)),
        "Hypothesis/reference length ratio (sacreBLEU's; below 1 = output too short):\n\n"
        + table(lambda g, c: _cell(c["ratio"], c["ratio_std"], 3)),
        f"Against `{baseline['label']}` per k: same-seed runs with a higher sacreBLEU (wins/seeds), and the paired "
        f"bootstrap p-value ({n_samples:,} resamples) of the first seeds on the k-inputs:\n\n" + table(against)])
