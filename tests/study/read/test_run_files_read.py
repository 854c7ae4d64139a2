"""A run's JSON read into typed records by their field names: a key an older run's file lacks takes
the field's default, a key that is no Python name is read through the field's `key`."""

from __future__ import annotations

import pytest

from study.read.run_files_read import ForcedBucket, LogLine, ScoresFile, from_json, log_lines


def test_keys_an_older_file_lacks_take_their_defaults() -> None:
    old = from_json(ScoresFile, {"sacrebleu": 27.5})  # tested before the length protocol
    assert old == ScoresFile() and old.concat_scores() == [] and old.longer_bleu() is None
    assert from_json(ScoresFile, None) == ScoresFile()  # no file at all reads as nothing scored
    new = from_json(ScoresFile, {"concat": [{"k": 2, "sacrebleu": 12.0}], "longer_than_training": {"sacrebleu": 9.0}})
    assert [(c.k, c.sacrebleu, c.length_ratio) for c in new.concat_scores()] == [(2, 12.0, None)]
    assert new.longer_bleu() == 9.0


def test_a_key_that_is_no_python_name_and_a_required_key() -> None:
    assert from_json(ForcedBucket, {"from": 8, "bucket": "8-15", "tokens": 3}) == ForcedBucket(8, "8-15")
    with pytest.raises(KeyError, match="from"):
        from_json(ForcedBucket, {"bucket": "8-15"})
    lines = log_lines([{"event": "start", "time": 1.0}, {"event": "end", "step": 40, "params": 1e6}])
    assert lines == [LogLine("start", time=1.0), LogLine("end", step=40, params=1e6)]
