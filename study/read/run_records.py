"""A `RunRecord` per run folder and per test-time variant tested into <run>/test_<name>/, each read
once from the run's config, metrics.jsonl, provenance.json and <test>/scores.json."""

from __future__ import annotations

import glob
import json
import math
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from artifacts.tested_run import best_validation, recorded_model, stale_test, untrained_changes
from settings.config import ExperimentConfig, Override, flatten, load_config, to_dict
from settings.key_roles import configuration_settings
from study.read.run_files_read import (
    ForcedAtK,
    ForcedBucket,
    ForcedReport,
    LogLine,
    ScoresFile,
    TrainingLength,
    from_json,
    log_lines,
)
from study.read.run_outputs import output_lines
from study.read.run_stats import retest_hint, stale_note, training_minutes
from study.records import (
    CodeState,
    JsonObject,
    KScore,
    PositionNll,
    Provenance,
    RunRecord,
    RunTeacherForced,
    SourceBucket,
    ValidPoint,
    frozen_map,
)
from utils import run_files
from utils.errors import HarnessError
from utils.metrics import METRICS, pool_nll
from utils.provenance import run_provenance
from utils.publish import settle_run
from utils.run_log import JsonlLogger
from utils.stored_files import STORE, read_text, stored_exists

SEED_SUFFIX = re.compile(r"[_\-/.](?:seed|s)[_\-=]?\d+$", re.IGNORECASE)


class CompareError(HarnessError):
    """Runs that cannot be compared (e.g. scored on different test sets)."""


def config_label(name: str) -> str:
    """A run name without its seed suffix: demo/rope_seed2 -> demo/rope."""
    return SEED_SUFFIX.sub("", name) or name


def experiment_settings(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A run's resolved config, flattened, without the keys that do not tell configurations apart
    (its seed, name, folder and how it ran: settings/key_roles.py)."""
    return configuration_settings(flatten(config), config.get("model", {}).get("positional", {}).get("name"))


def read_scores(run_dir: Path, test_dir: str) -> JsonObject:
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


def summarise_run(
    run_dir: Path, config: ExperimentConfig, variant: Optional[tuple[str, Mapping[str, Any]]] = None
) -> RunRecord:
    """The record of a run folder whose config.yaml reads as `config` (through the loader: an older
    spelling of a key groups with today's runs); with `variant` (folder, test-time settings: `run_variants`),
    of the run tested so, a configuration of its own."""
    test_dir, settings = variant or ("test", {})
    overrides = [Override.of(k, v, f"{k}={json.dumps(v)}") for k, v in settings.items()]
    cfg = load_config(raw=to_dict(config), overrides=overrides) if overrides else config
    try:
        records = JsonlLogger(run_dir / run_files.METRICS).history()
    except ValueError as e:
        raise CompareError(
            f"{run_dir / 'metrics.jsonl'} is not a log of JSON lines ({e}); leave the run out or repair the line"
        ) from None
    lines = log_lines(records)
    valid = [line for line in lines if line.event == "valid"]
    end = next((line for line in reversed(lines) if line.event == "end"), LogLine("end"))
    speeds = [line.tokens_per_sec for line in lines if line.event == "train" and line.tokens_per_sec is not None]
    metric = cfg.training.checkpoint_metric
    chosen = best_validation([r for r, line in zip(records, lines) if line.event == "valid"], metric)
    best = from_json(LogLine, chosen) if chosen else LogLine("valid")
    name = cfg.name or run_dir.name
    if settings:
        name += " [" + ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in settings.items()) + "]"
    scores = read_scores(run_dir, test_dir)
    check_tested_model(run_dir, test_dir, scores, cfg)
    parts = from_json(ScoresFile, scores)
    decoding = parts.decoding  # runs decoded differently are different configurations
    resolved = {**to_dict(cfg), **({"decoding": decoding} if isinstance(decoding, dict) else {})}
    return RunRecord(
        run=str(run_dir),
        test_dir=str(run_dir / test_dir),
        name=name,
        seed=cfg.seed,
        variant=bool(settings),
        config=cfg,
        group_key=json.dumps(experiment_settings(resolved), sort_keys=True),
        encoding=cfg.model.positional.name,
        train_loss=end.final_train_loss,
        valid_loss=best.valid_loss,
        valid_accuracy=best.valid_accuracy,
        params=end.params,
        train_minutes=training_minutes(lines),
        tokens_per_sec=statistics.fmean(speeds) if speeds else None,
        steps=end.step,
        valid_curve=tuple(ValidPoint(v.step, v.valid_loss) for v in valid if None not in (v.step, v.valid_loss)),
        provenance=Provenance(**{k: tuple(v) for k, v in run_provenance(run_dir).items()}),
        scores=frozen_map((key, scores.get(key)) for m in METRICS for key in (m.name, m.about) if key),
        longer_bleu=parts.longer_bleu(),
        by_source_length=tuple(from_json(SourceBucket, b) for b in parts.by_source_length or ()),
        concat=frozen_map((c.k, KScore(c.sacrebleu, c.length_ratio)) for c in parts.concat_scores()),
        teacher_forced=run_teacher_forced(parts.teacher_forced),
        stale_test=stale_test(scores, records, cfg.training.checkpoint_metric, test_dir) or "",
        tested_at=from_json(CodeState, parts.tested_at) if isinstance(parts.tested_at, dict) else None,
    )


def check_tested_model(run_dir: Path, test_dir: str, scores: JsonObject, cfg: ExperimentConfig) -> None:
    """A run is the model its test scored: config.yaml (editable) must state what scores.json records
    of its model, else the row would be labelled and grouped as another model."""
    changed = untrained_changes(recorded_model(scores), to_dict(cfg))
    if changed:
        key, tested, said = changed[0]
        raise CompareError(
            f"{run_dir / run_files.CONFIG}: {key} is {said!r}, but {run_dir / test_dir / run_files.SCORES} records "
            f"{tested!r} (the model trained and tested): restore config.yaml to what the run was trained with"
        )


def read_runs(patterns: Sequence[str]) -> list[RunRecord]:
    """A record per run folder the patterns name (each once), and one per variant it was tested as; a
    folder that is not a run is named on stderr, none left is a CompareError."""
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
    for line in stale_note(rows):  # a stale test: marked in the tables, kept out of the paired tests
        print(f"note: {line}", file=sys.stderr)
    for row in rows:  # an untested run's row has empty test columns: said, not left to be noticed
        if not row.variant and not stored_exists(Path(row.test_dir) / run_files.SCORES):
            print(
                f"note: {row.run} has no test scores (no test/scores.json): its test columns are empty "
                f"and nothing is compared with them; score it with python test.py --run {row.run}",
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


def check_no_copies(rows: Sequence[RunRecord]) -> None:
    """Two folders with one configuration, one seed and the same test hypotheses are one run given
    twice (a copied folder), refused: as two seeds they would fake a second seed. (Test outputs, not
    checkpoints: archived runs keep none.)"""
    seen: dict[tuple[str, str], list[tuple[str, list[str]]]] = {}
    for row in rows:
        hyps = None if row.variant else output_lines(Path(row.test_dir) / run_files.HYPOTHESES)
        if hyps is None:
            continue
        key = (row.group_key, json.dumps(row.seed))
        for other, other_hyps in seen.get(key, []):
            if other_hyps == hyps:
                raise CompareError(
                    f"{other} and {row.run} are the same run (one configuration, seed {row.seed}, "
                    f"identical test hypotheses): a copy would count as a second seed; leave one of them out"
                )
        seen[key] = [*seen.get(key, []), (row.run, hyps)]


def run_variants(run_dir: Path, config: ExperimentConfig) -> list[tuple[str, Mapping[str, Any]]]:
    """(folder, settings) of each test_<name>/ of a run's own test split scored with test-time --set
    overrides (sweep.py --variant); test_<file>/ of other test sets are not variants."""
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
        parts = from_json(ScoresFile, scores)
        # what it changed (a sweep's --set that the run was trained with is not a change)
        settings = {k: v for k, v in (parts.test_time_overrides or {}).items() if trained.get(k) != v}
        if parts.split and settings:
            variants.append((folder.name, settings))
    return variants


def run_teacher_forced(teacher_forced: Optional[JsonObject]) -> Optional[RunTeacherForced]:
    """A run's teacher-forced diagnostic (evaluation/teacher_forced.py) pooled over every k,
    token-weighted, EOS renormalised out, boundaries excluded (None: tested without it)."""
    report = from_json(ForcedReport, teacher_forced)
    if not isinstance(teacher_forced, dict) or not report.k:
        return None
    at_k = {k: from_json(ForcedAtK, e) for k, e in report.k.items()}  # in the order written
    buckets = [(from_json(ForcedBucket, b), b) for e in at_k.values() for b in e.buckets]
    labels: dict[int, str] = {}  # each bucket's start -> its label where first seen
    for b, _ in buckets:
        labels[b.start] = labels.get(b.start, b.bucket)
    return RunTeacherForced(
        training_length=from_json(TrainingLength, report.training_length).target or None,
        position_buckets=tuple(report.position_buckets or ()),
        nll_beyond=pool_nll(e.beyond_training for e in at_k.values()),
        by_position=tuple(
            PositionNll(labels[lo], lo, pool_nll([raw for b, raw in buckets if b.start == lo])) for lo in sorted(labels)
        ),
        # scores.json's k keys are strings: "2" before "10"
        boundary_p_eos=frozen_map((k, at_k[k].boundary_p_eos()) for k in sorted(at_k, key=int) if at_k[k].boundary),
    )
