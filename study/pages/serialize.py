"""The one serializer of a study's records (study/records.py) to the files compare.py writes:
<prefix>.json (`summary_json`), <prefix>.csv (`summary_csv`) and <prefix>_findings.json
(`findings_json`). Their bytes are those of the archived summaries (key order, which keys a case has,
numbers as json/csv write them): `make results-check` recomputes every archived study and compares.
A findings row's keys follow the order the rows were once built in place: a row not tested carries its
finding before `unit` and `joined_range`, a worded row after its reading's p values; the seed test's
`se_seed_veto` only under the older rule, the power figures only where a row has them; a sequential
family's `look` per declared row and `sequential` after the tables."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, fields
from typing import Mapping, Optional, Sequence

from study.judge.design import Design, design_of
from study.pages.summary_tables import SIGNATURE, has_teacher_forced
from study.read.run_stats import numeric_columns
from study.read.seed_provenance import spans
from study.records import (
    BucketStats,
    ComparisonRow,
    ConcatStats,
    Configuration,
    Findings,
    FindingsTable,
    Interim,
    JsonObject,
    LookPlan,
    Reading,
    RuleText,
    RunRecord,
    Stats,
    TeacherForcedStats,
)
from study.terms import ALL_K, Measure

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
        "by_source_length": [_bucket(b) for b in g.by_source_length] or None,
        "concat": {k: _concat(c) for k, c in g.concat.items()} or None,
        "per_run": [{k: r.value(k) for k in per_run} for r in g.runs],
        **({"seeds_span": spans(g)} if spans(g) else {}),
    }


def _bucket(b: BucketStats) -> JsonObject:
    return {"bucket": b.bucket, "num_sentences": b.num_sentences, "mean": b.bleu.mean, "std": b.bleu.std}


def _concat(c: ConcatStats) -> JsonObject:
    """A k's figures as the JSON and CSV write them: each measure's mean and std side by side."""
    bleu, ratio = c.bleu, c.ratio
    return {
        "bleu": bleu.mean,
        "bleu_std": bleu.std,
        "ratio": ratio.mean,
        "ratio_std": ratio.std,
        "n": c.n,
        "p_value": c.p_value,
        "seeds_above": c.seeds_above,
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
            "metric": Measure.SACREBLEU,
            "n_samples": n_samples,
        },
        "groups": out,
    }
    return json.dumps(report, indent=2) + "\n"


def _degradation(g: Configuration) -> Optional[JsonObject]:
    return {span.column: asdict(s) for span, s in g.degradation.items()} or None


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
        pooled = (g.degradation or {}).get(ALL_K) or Stats(None, None)
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
                **{f"k{k}_{key}": _concat(c)[key] for k, c in g.concat.items() for key in CONCAT_CSV},
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


def _seed_test(row: ComparisonRow) -> Optional[JsonObject]:
    if row.seed_test is None:
        return None
    return {k: v for k, v in asdict(row.seed_test).items() if k != "se_seed_veto" or v is not None}


WORDED_ONLY = ("withheld",)  # a reading's fields the JSON holds in its finding's words only


def _reading(reading: Reading, *left_out: str) -> JsonObject:
    """A reading as the findings JSON holds it (less `left_out`)."""
    return {k: v for k, v in asdict(reading).items() if k not in (*WORDED_ONLY, *left_out)}


def _row(r: ComparisonRow, design: Design) -> JsonObject:
    """A findings row as <prefix>_findings.json holds it (see the module's docstring for its key order)."""
    untested = r.untested is not None
    finding = {"finding": r.finding} if untested or r.reading is not None else {}
    reading = _reading(r.reading, "finding") if r.reading is not None else {}
    equivalence = r.power is not None and r.power.equivalence_power is not None
    power = {k: v for k, v in asdict(r.power).items() if equivalence or "equivalence" not in k} if r.power else {}
    return {
        "config": r.config,
        "encoding": r.encoding,
        "compared_on": r.compared_on,
        "seeds": list(r.seeds),
        "num_sentences": r.num_sentences,
        "mean_difference": r.mean_difference,
        "per_seed": [asdict(s) for s in r.per_seed],
        "seed_test": _seed_test(r),
        "p_value": r.p_value,
        "lower_is_better": r.lower_is_better,
        **(finding if untested else {}),
        **({"unit": r.unit} if r.unit is not None else {}),
        "joined_range": r.joined_range,
        "from_declaring_commit": r.from_declaring_commit,
        "declared": r.declared,
        **reading,
        **({} if untested else finding),
        **({"exploratory": _reading(r.exploratory)} if r.exploratory is not None else {}),
        **power,
        **{key: asdict(record) for key, record in design.row_records(r)},
    }


def _table(t: FindingsTable, design: Design) -> JsonObject:
    return {f.name: [_row(r, design) for r in t.rows] if f.name == "rows" else getattr(t, f.name) for f in fields(t)}


def _value(x):
    """A field of the findings report as JSON holds it: records as objects, read-only maps as objects,
    tuples as lists."""
    if isinstance(x, Interim):  # (a sequential plan's next look only where there is one)
        return {k: v for k, v in asdict(x).items() if k != "look" or v is not None}
    if isinstance(x, (RuleText, LookPlan)):
        return asdict(x)
    if isinstance(x, Mapping):
        return dict(x)
    return list(x) if isinstance(x, tuple) else x


def findings_json(findings: Findings) -> str:
    """<prefix>_findings.json: the method's settings, then the tables (study/records.Findings's order)."""
    design = design_of(findings)
    tables = [_table(t, design) for t in findings.tables]
    out = {
        f.name: tables if f.name == "tables" else _value(getattr(findings, f.name))
        for f in fields(findings)
        if design.serializes(f.name)
    }
    return json.dumps(out, indent=2) + "\n"
