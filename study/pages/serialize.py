"""The one serializer of a study's records (study/records.py): <prefix>.json, .csv and _findings.json, byte
for byte the archived summaries' (key order, which keys a case has; `make results-check` compares). A
findings row's keys keep the order rows were once built in: a row not tested has its finding before `unit`
and `joined_range`, a worded row after its reading's p values; `se_seed_veto` only under the older rule,
`tested_at_declaring_commit` only where false (a test at a commit that did not declare the family),
power figures only where a row has them; a sequential family's `look` per declared row, `sequential` last."""

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
    Stats,
)
from study.terms import ALL_K, Measure

CONCAT_CSV = ("bleu", "bleu_std", "ratio", "ratio_std", "p_value")  # per k, in the CSV


def _teacher_forced(g: Configuration) -> JsonObject:
    tf = g.teacher_forced
    return {
        "runs": tf.runs,
        "training_length": tf.training_length,
        "nll_beyond": asdict(tf.nll_beyond),
        "by_position": [{"bucket": b.bucket, "from": b.start, **asdict(b.nll)} for b in tf.by_position],
        "boundary_p_eos": {k: asdict(s) for k, s in tf.boundary_p_eos.items()},
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
            for r in g.runs
            if r.teacher_forced
        ],
    }


def _group(g: Configuration, tf: bool, degradation: bool) -> JsonObject:
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
        **({"teacher_forced": _teacher_forced(g) if g.teacher_forced else None} if tf else {}),
        # per selection (all k, each k, by start): mean, std, n
        **({"degradation": {s.column: asdict(x) for s, x in g.degradation.items()} or None} if degradation else {}),
    }


def _bucket(b: BucketStats) -> JsonObject:
    return {"bucket": b.bucket, "num_sentences": b.num_sentences, "mean": b.bleu.mean, "std": b.bleu.std}


def _concat(c: ConcatStats) -> JsonObject:
    """A k's figures as the JSON and CSV write them: each measure's mean and std side by side."""
    return {
        "bleu": c.bleu.mean,
        "bleu_std": c.bleu.std,
        "ratio": c.ratio.mean,
        "ratio_std": c.ratio.std,
        "n": c.n,
        "p_value": c.p_value,
        "seeds_above": c.seeds_above,
    }


def summary_json(groups: Sequence[Configuration], baseline: Optional[Configuration], n_samples: int) -> str:
    """<prefix>.json: the main table's numbers per configuration and per run; the teacher-forced
    figures and the degradation only when some configuration has them (older runs' report as it was)."""
    tf, degradation = has_teacher_forced(groups), any(g.degradation for g in groups)
    report = {
        "baseline": baseline.label if baseline else None,
        "significance": {
            "test": "seed-level t-test over the seeds both ran, the test set's joint-bootstrap variance "
            "added, two-sided (see *_findings.json)",
            "metric": Measure.SACREBLEU,
            "n_samples": n_samples,
        },
        "groups": [_group(g, tf, degradation) for g in groups],
    }
    return json.dumps(report, indent=2) + "\n"


def csv_rows(groups: Sequence[Configuration]) -> tuple[list[str], list[JsonObject]]:
    """The CSV's columns (every row has them all), and a row per configuration: the main table's numbers,
    then per k of the length protocol, then the teacher-forced and degradation columns where some
    configuration has them (only then: older runs' CSV stays as it was)."""
    ks = sorted({k for g in groups for k in g.concat})
    tf, degradation = has_teacher_forced(groups), any(g.degradation for g in groups)
    rows = []
    for g in groups:
        wins = g.seeds_above or (None, None)
        concat = {k: _concat(c) for k, c in g.concat.items()}
        nll = g.teacher_forced.nll_beyond if g.teacher_forced else Stats(None, None)
        pooled = (g.degradation or {}).get(ALL_K) or Stats(None, None)  # the length study's headline, all k
        rows.append(
            {
                "label": g.label,
                "encoding": g.encoding,
                "n": g.n,
                **{f: v for k in numeric_columns() for f, v in ((k, g.mean(k)), (f"{k}_std", g.std(k)))},
                "p_value": g.p_value,
                "seeds_above": wins[0],
                "seeds_compared": wins[1],
                "is_baseline": g.is_baseline,
                "runs": ";".join(r.run for r in g.runs),
                "sacrebleu_signature": g.runs[0].scores.get(SIGNATURE),
                **{f"k{k}_{key}": concat.get(k, {}).get(key) for k in ks for key in CONCAT_CSV},
                **({"tf_nll_beyond": nll.mean, "tf_nll_beyond_std": nll.std} if tf else {}),
                **({"degradation": pooled.mean, "degradation_std": pooled.std} if degradation else {}),
            }
        )
    return list(rows[0]) if rows else [], rows


def summary_csv(groups: Sequence[Configuration]) -> str:
    """<prefix>.csv."""
    fields, rows = csv_rows(groups)
    with io.StringIO() as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
        return f.getvalue()


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
    seed_test = asdict(r.seed_test) if r.seed_test is not None else None
    return {
        "config": r.config,
        "encoding": r.encoding,
        "compared_on": r.compared_on,
        "seeds": list(r.seeds),
        "num_sentences": r.num_sentences,
        "mean_difference": r.mean_difference,
        "per_seed": [asdict(s) for s in r.per_seed],
        "seed_test": seed_test and {k: v for k, v in seed_test.items() if k != "se_seed_veto" or v is not None},
        "p_value": r.p_value,
        "lower_is_better": r.lower_is_better,
        **(finding if untested else {}),
        **({"unit": r.unit} if r.unit is not None else {}),
        "joined_range": r.joined_range,
        "from_declaring_commit": r.from_declaring_commit,
        **({} if r.tested_at_declaring_commit else {"tested_at_declaring_commit": False}),
        "declared": r.declared,
        **({"sets": [asdict(s) for s in r.sets]} if r.sets else {}),  # a claim across test sets: each set's
        **reading,
        **({} if untested else finding),
        **({"exploratory": _reading(r.exploratory)} if r.exploratory is not None else {}),
        **power,
        **{key: _record(record) for key, record in design.row_records(r)},
    }


def _record(record) -> JsonObject:
    """A design's record of a row; a look's repeated interval as its two ends, repeated_low and repeated_high."""
    out = asdict(record)
    if "repeated" not in out:
        return out
    low, high = out.pop("repeated") or (None, None)
    return {**out, "repeated_low": low, "repeated_high": high}


def _table(t: FindingsTable, design: Design) -> JsonObject:
    return {f.name: [_row(r, design) for r in t.rows] if f.name == "rows" else getattr(t, f.name) for f in fields(t)}


def _value(x):
    """A field of the findings report as JSON holds it: records and read-only maps as objects, tuples as lists."""
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
