"""The one serializer of a study's records (study/records.py) to the files compare.py writes:
<prefix>.json (`summary_json`), <prefix>.csv (`summary_csv`) and <prefix>_findings.json
(`findings_json`). Their bytes are those of the archived summaries (key order, which keys a case has,
numbers as json/csv write them): `make results-check` recomputes every archived study and compares."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Optional, Sequence

from study.records import Configuration, JsonObject, RunRecord, Stats, TeacherForcedStats
from study.seed_provenance import spans
from study.summary_tables import SIGNATURE, has_teacher_forced, numeric_columns

CONCAT_CSV = ("bleu", "bleu_std", "ratio", "ratio_std", "p_value")  # per k, in the CSV


def _stats(s: Optional[Stats]) -> Optional[JsonObject]:
    return asdict(s) if s is not None else None


def _teacher_forced(tf: TeacherForcedStats, runs: Sequence[RunRecord]) -> JsonObject:
    """A configuration's teacher-forced figures, with each run's own (`per_run`)."""
    return {
        "runs": tf.runs,
        "training_length": tf.training_length,
        "nll_beyond": _stats(tf.nll_beyond),
        "by_position": [{"bucket": b.bucket, "from": b.start, **asdict(b.nll)} for b in tf.by_position],
        "boundary_p_eos": {k: _stats(s) for k, s in tf.boundary_p_eos.items()},
        "per_run": [
            {
                "run": r.run,
                "seed": r.seed,
                "training_length": r.teacher_forced.training_length,
                "position_buckets": list(r.teacher_forced.position_buckets),
                "nll_beyond": r.teacher_forced.nll_beyond,
                "by_position": [
                    {"bucket": b.bucket, "from": b.start, "nll_no_eos": b.nll} for b in r.teacher_forced.by_position
                ],
                "boundary_p_eos": dict(r.teacher_forced.boundary_p_eos),
            }
            for r in runs
            if r.teacher_forced
        ],
    }


def _group(g: Configuration) -> JsonObject:
    per_run = ("run", "seed", *numeric_columns())
    return {
        "label": g.label,
        "encoding": g.encoding,
        "n": g.n,
        "seeds": list(g.seeds),
        "runs": [r.run for r in g.runs],
        "mean": {k: g.mean(k) for k in numeric_columns()},
        "std": {k: g.std(k) for k in numeric_columns()},
        "p_value": g.p_value,
        "seeds_above": list(g.seeds_above) if g.seeds_above else None,
        "is_baseline": g.is_baseline,
        "by_source_length": [asdict(b) for b in g.by_source_length] if g.by_source_length is not None else None,
        "concat": {k: asdict(c) for k, c in g.concat.items()} or None,
        "per_run": [{k: r.value(k) for k in per_run} for r in g.runs],
        **({"seeds_span": spans(g)} if spans(g) else {}),
    }


def summary_json(groups: Sequence[Configuration], baseline: Optional[Configuration], n_samples: int) -> str:
    """<prefix>.json: the main table's numbers per configuration and per run; the teacher-forced
    figures and the degradation only when some configuration has them (older runs' report as it was)."""
    out = [_group(g) for g in groups]
    if has_teacher_forced(groups):
        out = [{**o, "teacher_forced": _teacher_forced(g.teacher_forced, g.runs) if g.teacher_forced else None}
               for g, o in zip(groups, out)]  # fmt: skip
    if any(g.degradation for g in groups):  # per selection (all k, each k, by start): mean, std, n
        out = [{**o, "degradation": _degradation(g)} for g, o in zip(groups, out)]
    report = {
        "baseline": baseline.label if baseline else None,
        "significance": {
            "test": "seed-level t-test over the seeds both ran, the test set's joint-bootstrap variance "
            "added, two-sided (see *_findings.json)",
            "metric": "sacreBLEU",
            "n_samples": n_samples,
        },
        "groups": out,
    }
    return json.dumps(report, indent=2) + "\n"


def _degradation(g: Configuration) -> Optional[JsonObject]:
    return {label: asdict(s) for label, s in g.degradation.items()} if g.degradation is not None else None


def csv_rows(groups: Sequence[Configuration]) -> tuple[list[str], list[JsonObject]]:
    """The CSV's columns, and a row per configuration: the main table's numbers, then per k of the
    length protocol, then the teacher-forced and degradation columns where some configuration has them."""
    fields = (
        ["label", "encoding", "n"]
        + [f for k in numeric_columns() for f in (k, f"{k}_std")]
        + ["p_value", "seeds_above", "seeds_compared", "is_baseline", "runs", "sacrebleu_signature"]
    )
    ks = sorted({k for g in groups for k in g.concat})
    fields += [f"k{k}_{key}" for k in ks for key in CONCAT_CSV]
    tf, degradation = has_teacher_forced(groups), any(g.degradation for g in groups)
    fields += ["tf_nll_beyond", "tf_nll_beyond_std"] if tf else []  # only then: older runs' CSV stays as it was
    fields += ["degradation", "degradation_std"] if degradation else []  # the length study's headline, all k
    rows = []
    for g in groups:
        wins = g.seeds_above
        nll = g.teacher_forced.nll_beyond if g.teacher_forced else Stats(None, None)
        pooled = (g.degradation or {}).get("all k") or Stats(None, None)
        rows.append(
            {
                "label": g.label,
                "encoding": g.encoding,
                "n": g.n,
                "p_value": g.p_value,
                "seeds_above": wins[0] if wins else None,
                "seeds_compared": wins[1] if wins else None,
                "is_baseline": g.is_baseline,
                "runs": ";".join(r.run for r in g.runs),
                "sacrebleu_signature": g.runs[0].scores.get(SIGNATURE),
                **{f: v for k in numeric_columns() for f, v in ((k, g.mean(k)), (f"{k}_std", g.std(k)))},
                **{f"k{k}_{key}": getattr(c, key) for k, c in g.concat.items() for key in CONCAT_CSV},
                **({"tf_nll_beyond": nll.mean, "tf_nll_beyond_std": nll.std} if tf else {}),
                **({"degradation": pooled.mean, "degradation_std": pooled.std} if degradation else {}),
            }
        )
    return fields, rows


def summary_csv(groups: Sequence[Configuration]) -> str:
    """<prefix>.csv."""
    fields, rows = csv_rows(groups)
    with io.StringIO() as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
        return f.getvalue()
