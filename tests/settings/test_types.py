"""How config values are read (settings/types.py): a number key's text that is a number is read
as one, in every section below and in lists and pairs, and nothing else is touched."""

from __future__ import annotations

import math

from settings.schema import ExperimentConfig
from settings.types import numbers_from_text


def test_number_text_is_read_as_a_number_where_the_schema_has_a_number() -> None:
    raw = {
        "model": {"dropout": "1e-1", "d_model": "32", "activation": "relu"},
        "training": {"lr": "nan", "betas": ["0.9", 0.98], "clip_grad_norm": "1", "schedule": {"decay": ".5"}},
        "name": "1e5",
    }
    read = numbers_from_text(raw, ExperimentConfig)
    assert read["model"] == {"dropout": 0.1, "d_model": "32", "activation": "relu"}  # an int key keeps its text
    assert math.isnan(read["training"]["lr"]) and read["training"]["betas"] == [0.9, 0.98]
    assert read["training"]["clip_grad_norm"] == 1.0 and read["training"]["schedule"] == {"decay": 0.5}
    assert read["name"] == "1e5"  # a text key keeps its text
    assert raw["model"]["dropout"] == "1e-1"  # the mapping given is not changed


def test_text_that_is_not_a_number_and_values_that_are_not_mappings_pass_through() -> None:
    assert numbers_from_text({"training": {"lr": "fast"}}, ExperimentConfig) == {"training": {"lr": "fast"}}
    assert numbers_from_text({"training": 5}, ExperimentConfig) == {"training": 5}
    assert numbers_from_text(["not", "a", "mapping"], ExperimentConfig) == ["not", "a", "mapping"]
