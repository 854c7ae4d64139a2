"""The runs of a comparison, read and grouped (compare.py's input side): one row per run folder (and
per test-time variant tested into <run>/test_<name>/), runs of one configuration grouped as its
seeds (`group_runs`), the baseline picked, and the per-seed statistics every table and finding uses
(seed wins, significance columns, per-bucket and teacher-forced pools)."""

from __future__ import annotations

import glob
import json
import math
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Optional

from evaluation.teacher_forced import pool_nll
from settings.config import ExperimentConfig, Override, flatten, load_config, to_dict
from settings.key_roles import configuration_settings
from study.degradation import degradation_stats, run_degradation
from study.findings import find_row
from study.run_outputs import output_lines
from study.run_stats import mean_std, retest_hint, seed_wins, test_folder, training_minutes
from study.summary_tables import numeric_columns
from utils import run_files
from utils.errors import HarnessError
from utils.metrics import METRIC_SIGN, METRICS
from utils.provenance import run_provenance
from utils.publish import settle_run
from utils.runtime import JsonlLogger
from utils.stored_files import STORE, read_text, stored_exists

SEED_SUFFIX = re.compile(r"[_\-/.](?:seed|s)[_\-=]?\d+$", re.IGNORECASE)


class CompareError(HarnessError):
    """Runs that cannot be compared (e.g. scored on different test sets)."""


def best_validation(valid: list[dict], metric: str) -> Optional[dict]:
    """The validation record the run's best checkpoint was chosen by (its finite best by `metric`)."""
    if not valid:
        return None
    sign = METRIC_SIGN[metric]
    scored = [r for r in valid if r.get(metric) is not None and math.isfinite(r[metric])]
    return max(scored, key=lambda r: sign * r[metric]) if scored else valid[-1]


def read_scores(run_dir: Path, test_dir: str) -> dict:
    """<run>/<test_dir>/scores.json ({} when the run is not tested)."""
    scores_path = run_dir / test_dir / run_files.SCORES
    try:
        text = read_text(scores_path)
        scores = json.loads(text) if text is not None else {}
    except ValueError as e:
        raise CompareError(f"{scores_path} is not readable JSON ({e}); {retest_hint(scores_path)}") from None
    if not isinstance(scores, dict):
        raise CompareError(
            f"{scores_path} is not a scores object (it holds {type(scores).__name__}); {retest_hint(scores_path)}"
        )
    for key in (m.name for m in METRICS):  # a hand edit or a damaged file must not pass for an untested run
        value = scores.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CompareError(f"{scores_path}: {key!r} is {value!r}, not a number; {retest_hint(scores_path)}")
    return scores


def summarise_run(run_dir: Path, config: ExperimentConfig, variant: Optional[tuple[str, dict]] = None) -> dict:
    """One row for a run folder whose config.yaml reads as `config` (read once, through the loader, so
    runs saved with an older spelling of a key group with today's runs). With `variant` (folder name,
    test-time settings), the row of the run tested so, in <run>/<folder>/ (`run_variants`): its
    settings make it a configuration of its own."""
    test_dir, settings = variant or ("test", {})
    overrides = [Override(tuple(k.split(".")), v, f"{k}={json.dumps(v)}") for k, v in settings.items()]
    cfg = to_dict(load_config(raw=to_dict(config), overrides=overrides) if overrides else config)
    try:
        records = JsonlLogger(run_dir / run_files.METRICS).history()
    except ValueError as e:
        raise CompareError(
            f"{run_dir / 'metrics.jsonl'} is not a log of JSON lines ({e}); leave the run out or repair the line"
        ) from None
    valid = [r for r in records if r["event"] == "valid"]
    ends = [r for r in records if r["event"] == "end"]
    speeds = [r["tokens_per_sec"] for r in records if r["event"] == "train" and r.get("tokens_per_sec") is not None]
    best = best_validation(valid, cfg["training"]["checkpoint_metric"])
    name = cfg.get("name") or run_dir.name
    if settings:
        name += " [" + ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in settings.items()) + "]"
    row = {
        "run": str(run_dir),
        "test_dir": str(run_dir / test_dir),
        "name": name,
        "seed": cfg.get("seed"),
        "variant": bool(settings),
        "config": cfg,
        "encoding": cfg["model"]["positional"]["name"],
        "train_loss": ends[-1].get("final_train_loss") if ends else None,
        "valid_loss": best.get("valid_loss") if best else None,
        "valid_accuracy": best.get("valid_accuracy") if best else None,
        "params": ends[-1]["params"] if ends else None,
        "train_minutes": training_minutes(records),
        "tokens_per_sec": statistics.fmean(speeds) if speeds else None,
        "steps": ends[-1]["step"] if ends else None,
        "valid_events": valid,
        "provenance": run_provenance(run_dir),  # code, device, precision (study/seed_provenance.py)
    }
    scores = read_scores(run_dir, test_dir)
    if isinstance(scores.get("decoding"), dict):  # runs decoded differently are different configurations
        cfg["decoding"] = scores["decoding"]
    for key in (key for m in METRICS for key in (m.name, m.about) if key):
        row[key] = scores.get(key)
    row["longer_bleu"] = (scores.get("longer_than_training") or {}).get("sacrebleu")
    row["by_source_length"] = scores.get("by_source_length")
    row["concat"] = {c["k"]: c for c in scores.get("concat") or []}
    row["teacher_forced"] = run_teacher_forced(scores.get("teacher_forced"))
    return row


def read_runs(patterns: list[str]) -> list[dict]:
    """One row per run folder the patterns name (each once), and one per variant it was tested as.
    A folder that is not a run is named on stderr with the reason; none left is a CompareError; the
    same run given twice (a copied folder) is refused, not counted as two seeds."""
    rows, seen, skipped = [], set(), []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern))
        for path in map(Path, matches or [pattern]):
            if matches and (path.is_file() or path.name == STORE):  # an earlier summary.md, the study's
                continue  # shared test texts (utils/stored_files.py): passed over
            why = not_a_run(path)
            if why:
                skipped.append(f"{path} ({why})")
            elif path.resolve() not in seen:
                seen.add(path.resolve())
                settle_run(path, "compare.py")  # a test.py stopped while publishing: finished, or refused
                config = load_config(path / run_files.CONFIG)  # each run's config read once
                rows.append(summarise_run(path, config))
                rows += [summarise_run(path, config, variant) for variant in run_variants(path, config)]
    for line in skipped:
        print(f"note: compare.py skipped {line}", file=sys.stderr)
    for row in rows:  # an untested run's row has empty test columns: said, not left to be noticed
        if not row.get("variant") and not stored_exists(Path(row["test_dir"]) / run_files.SCORES):
            print(
                f"note: {row['run']} has no test scores (no test/scores.json): its test columns are empty "
                f"and nothing is compared with them; score it with python test.py --run {row['run']}",
                file=sys.stderr,
            )
    if not rows:
        raise CompareError(
            f"no run folders (with config.yaml) among {', '.join(patterns)}"
            + (f"; skipped {'; '.join(skipped[:5])}" if skipped else "")
        )
    check_no_copies(rows)
    return rows


def not_a_run(path: Path) -> Optional[str]:
    """Why `path` is not a run folder to compare (None when it is one)."""
    if not path.exists():
        return "no such folder"
    if not path.is_dir():
        return "a file, not a run folder"
    if (path / run_files.CONFIG).is_file():
        return None
    inner = [p.parent.name for p in sorted(path.glob("*/config.yaml"))]
    return "no config.yaml: not a run folder" + (
        f"; it holds runs ({', '.join(inner[:3])}{' ...' if len(inner) > 3 else ''}): give {path}/*" if inner else ""
    )


def check_no_copies(rows: list[dict]) -> None:
    """Two folders with one configuration, one seed and the same test hypotheses are one run given
    twice (a copied folder): counted as two seeds they would shrink the spread and fake a second
    seed. Test outputs, not checkpoints, are compared: archived runs keep no checkpoints."""
    seen: dict[str, list[tuple[str, list[str]]]] = {}
    for row in rows:
        hyps = None if row.get("variant") else output_lines(Path(row["test_dir"]) / run_files.HYPOTHESES)
        if hyps is None:
            continue
        key = json.dumps([experiment_settings(row["config"]), row["seed"]], sort_keys=True)
        for other, other_hyps in seen.get(key, []):
            if other_hyps == hyps:
                raise CompareError(
                    f"{other} and {row['run']} are the same run (one configuration, seed {row['seed']}, "
                    f"identical test hypotheses): a copy would count as a second seed; leave one of them out"
                )
        seen.setdefault(key, []).append((row["run"], hyps))


def run_variants(run_dir: Path, config: ExperimentConfig) -> list[tuple[str, dict]]:
    """(folder, settings) of each variant of a run trained with `config`: a test_<name>/ of its own
    test split scored with test-time --set overrides (sweep.py --variant); test_<file>/ of other
    test sets are not."""
    trained = flatten(to_dict(config))
    variants = []
    for folder in sorted(p for p in run_dir.glob("test_*") if p.is_dir()):
        try:
            text = read_text(folder / run_files.SCORES)
            scores = json.loads(text) if text is not None else None
        except ValueError:
            continue  # not readable: not offered as a variant (its own run's scores are checked)
        if not isinstance(scores, dict):
            continue
        # what it changed (a sweep's --set that the run was trained with is not a change)
        settings = {k: v for k, v in (scores.get("test_time_overrides") or {}).items() if trained.get(k) != v}
        if scores.get("split") and settings:
            variants.append((folder.name, settings))
    return variants


def run_teacher_forced(report: Optional[dict]) -> Optional[dict]:
    """A run's teacher-forced diagnostic (evaluation/teacher_forced.py) pooled over k = 1 and every
    joined k, token-weighted, EOS renormalised out, boundaries excluded: NLL beyond the decoder's
    training length, NLL per target-position bucket, and p(EOS) at the boundaries per k. None for
    runs tested without it (older runs)."""
    if not isinstance(report, dict) or not report.get("k"):
        return None
    entries = list(report["k"].values())
    buckets: dict[int, tuple[str, list]] = {}
    for e in entries:
        for b in e["buckets"]:
            buckets.setdefault(b["from"], (b["bucket"], []))[1].append(b)
    return {
        "training_length": (report.get("training_length") or {}).get("target") or None,
        "position_buckets": report.get("position_buckets") or [],
        "nll_beyond": pool_nll(e.get("beyond_training") for e in entries),
        "by_position": [
            {"bucket": label, "from": lo, "nll_no_eos": pool_nll(bs)} for lo, (label, bs) in sorted(buckets.items())
        ],
        "boundary_p_eos": {
            k: e["boundary"]["p_eos"] for k, e in sorted(report["k"].items(), key=_k_order) if e.get("boundary")
        },
    }


def _k_order(item: tuple[str, dict]) -> int:
    return int(item[0])  # scores.json's k keys are strings: "2" before "10"


# ----------------------------------------------------------------------------- grouping and statistics


def config_label(name: str) -> str:
    """A run name without its seed suffix: demo/rope_seed2 -> demo/rope."""
    return SEED_SUFFIX.sub("", name) or name


def experiment_settings(config: dict) -> dict:
    """A run's resolved config (flattened) without the keys that do not tell configurations apart:
    its seed, name, folder and how it ran (the keys' roles: settings/key_roles.py)."""
    return configuration_settings(flatten(config), config.get("model", {}).get("positional", {}).get("name"))


def group_runs(rows: list[dict]) -> list[dict]:
    """One group per configuration (config equal except seed/name/run_dir), in order of first appearance."""
    groups: dict[str, dict] = {}
    for row in rows:
        key = json.dumps(experiment_settings(row["config"]), sort_keys=True)
        groups.setdefault(key, {"runs": []})["runs"].append(row)
    out = list(groups.values())
    for g in out:
        g["runs"].sort(key=lambda r: (r["seed"] is None, r["seed"] if r["seed"] is not None else 0, r["run"]))
        first = g["runs"][0]
        g.update(
            label=config_label(first["name"]),
            encoding=first["encoding"],
            n=len(g["runs"]),
            variant=first.get("variant", False),
            seeds=[r["seed"] for r in g["runs"]],
            mean={},
            std={},
            p_value=None,
            seeds_above=None,
            is_baseline=False,
        )
        for key in numeric_columns():
            g["mean"][key], g["std"][key], _ = mean_std([r.get(key) for r in g["runs"]])
        g["by_source_length"] = bucket_stats(g["runs"])
        g["teacher_forced"] = teacher_forced_stats(g["runs"])
        g["degradation_runs"] = [run_degradation(r) for r in g["runs"]]  # per run, for the plot and r
        g["degradation"] = degradation_stats(g["degradation_runs"])
    counts = Counter(g["label"] for g in out)
    for g in out:  # two configurations with one name (e.g. different --set): tell them apart by folder
        if counts[g["label"]] > 1:
            g["label"] = f"{g['label']} ({config_label(g['runs'][0]['run'])})"
    for i, g in enumerate(out):
        if [h["label"] for h in out].count(g["label"]) > 1:
            g["label"] += f" #{i + 1}"
    return out


def bucket_stats(runs: list[dict]) -> Optional[list[dict]]:
    """Mean/std test sacreBLEU per source-length bucket over a group's runs (None if no run has buckets)."""
    with_buckets = [r["by_source_length"] for r in runs if r.get("by_source_length")]
    if not with_buckets:
        return None
    out = []
    for b in with_buckets[0]:
        vals = [next((x["sacrebleu"] for x in bs if x["bucket"] == b["bucket"]), None) for bs in with_buckets]
        mean, std, _ = mean_std(vals)
        out.append({"bucket": b["bucket"], "num_sentences": b["num_sentences"], "mean": mean, "std": std})
    return out


def teacher_forced_stats(runs: list[dict]) -> Optional[dict]:
    """Mean/std over a group's runs of their pooled teacher-forced figures (None if no run has them);
    the training length where the runs agree on it."""
    have = [r for r in runs if r.get("teacher_forced")]
    if not have:
        return None
    tf = [r["teacher_forced"] for r in have]

    def stats(values: list) -> dict:
        return dict(zip(("mean", "std", "n"), mean_std(values)))

    positions = sorted({(b["from"], b["bucket"]) for t in tf for b in t["by_position"]})
    lengths = {t["training_length"] for t in tf}
    ks = sorted({k for t in tf for k in t["boundary_p_eos"]}, key=int)
    return {
        "runs": len(have),
        "training_length": lengths.pop() if len(lengths) == 1 else None,
        "nll_beyond": stats([t["nll_beyond"] for t in tf]),
        "by_position": [
            {
                "bucket": label,
                "from": lo,
                **stats([next((b["nll_no_eos"] for b in t["by_position"] if b["from"] == lo), None) for t in tf]),
            }
            for lo, label in positions
        ],
        "boundary_p_eos": {k: stats([t["boundary_p_eos"].get(k) for t in tf]) for k in ks},
        "per_run": [{"run": r["run"], "seed": r["seed"], **r["teacher_forced"]} for r in have],
    }


def pick_baseline(groups: list[dict], wanted: Optional[str]) -> dict:
    """The group named `wanted` (label, then encoding); default: the sinusoidal group, else the first."""
    if wanted:
        for field in ("label", "encoding"):
            match = [g for g in groups if g[field] == wanted]
            if len(match) > 1:  # an encoding several share (length/sinusoidal, length/sinusoidal_concat)
                match = [g for g in match if g["label"].rsplit("/", 1)[-1] == wanted] or match
            if len(match) > 1:  # still several: which one is the user's call, not the first one's
                raise CompareError(
                    f"--baseline {wanted!r} matches {len(match)} configurations "
                    f"({', '.join(g['label'] for g in match)}); give one of these labels"
                )
            if match:
                return match[0]
        raise CompareError(
            f"--baseline {wanted!r} matches no configuration; choose a label "
            f"({', '.join(g['label'] for g in groups)}) or an encoding "
            f"({', '.join(sorted({g['encoding'] for g in groups}))})"
        )
    return next((g for g in groups if g["encoding"] == "sinusoidal"), groups[0])


def check_same_references(groups: list[dict]) -> None:
    """Runs scored on different test sets cannot be compared: CompareError naming two of them."""
    refs_by_run = {
        str(test_folder(r)): output_lines(test_folder(r) / run_files.REFERENCES) for g in groups for r in g["runs"]
    }
    have = [(run, refs) for run, refs in refs_by_run.items() if refs is not None]
    for run, refs in have[1:]:
        if refs != have[0][1]:
            raise CompareError(
                f"test references differ between {have[0][0]} and {run}: runs scored on different "
                f"test sets cannot be compared (pass --no_significance to tabulate them anyway)"
            )


def add_significance(groups: list[dict], baseline: dict, findings: dict) -> None:
    """Each group's p vs the baseline on the test set and per k: the findings' p over all shared
    seeds, so that one comparison has one p wherever it is printed (k = 1 is the test set)."""
    for g in groups:
        if g is baseline:
            continue
        row = find_row(findings, "test", g["label"], "test set")
        g["p_value"] = row["p_value"] if row else None
        for k, c in (g.get("concat") or {}).items():
            row = (
                find_row(findings, "test", g["label"], "test set")
                if k == 1
                else find_row(findings, "concat", g["label"], f"k={k}")
            )
            c["p_value"] = row["p_value"] if row else None


def add_seed_wins(groups: list[dict], baseline: dict, margin: float = 0.0) -> None:
    """Set each group's `seeds_above` = [wins, pairs]: over the seeds it shares with the baseline,
    how many of its runs have a higher test sacreBLEU than the baseline's run with the same seed
    (None when no seed is shared or no run is scored)."""
    for g in groups:
        if g is not baseline:
            g["seeds_above"] = seed_wins(g["runs"], baseline["runs"], lambda r: r.get("sacrebleu"), margin)


# ----------------------------------------------------------------------------- command line
