"""The one serializer of a study's records (study/pages/serialize.py): <prefix>.json and .csv as the
archived summaries hold them (`make results-check` compares every archived study byte for byte);
here, the keys a configuration has in each case and their order."""

from __future__ import annotations

import json

from study.pages.serialize import summary_csv, summary_json
from study.read.run_stats import numeric_columns
from study.records import Configuration, RunRecord, Stats, frozen_map
from study.terms import ALL_K


def group(label: str, **extra) -> Configuration:
    stats = frozen_map((k, Stats(1.0, None, 1)) for k in numeric_columns())
    return Configuration((RunRecord(run=f"runs/{label}", seed=1),), label, encoding=label, stats=stats, **extra)


def test_the_json_keys_and_their_order() -> None:
    base, rope = group("sinusoidal", is_baseline=True), group("rope", seeds_above=(1, 1))
    report = json.loads(summary_json([base, rope], base, 100))
    assert list(report) == ["baseline", "significance", "groups"] and report["baseline"] == "sinusoidal"
    keys = ["label", "encoding", "n", "seeds", "runs", "mean", "std", "p_value", "seeds_above", "is_baseline"]
    assert list(report["groups"][1]) == [*keys, "by_source_length", "concat", "per_run"]  # no teacher-forced runs
    assert report["groups"][1]["seeds_above"] == [1, 1] and report["groups"][0]["concat"] is None
    assert list(report["groups"][0]["per_run"][0]) == ["run", "seed", *numeric_columns()]
    degraded = group("rope", degradation=frozen_map({ALL_K: Stats(0.1, 0.01, 2)}))
    report = json.loads(summary_json([base, degraded], base, 100))
    assert report["groups"][0]["degradation"] is None
    assert report["groups"][1]["degradation"] == {"all k": {"mean": 0.1, "std": 0.01, "n": 2}}


def test_the_csv_columns() -> None:
    header = summary_csv([group("sinusoidal")]).splitlines()[0].split(",")
    assert header[:4] == ["label", "encoding", "n", "train_loss"] and header[-1] == "sacrebleu_signature"
