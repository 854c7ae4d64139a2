"""compare.py's plots (study/pages/comparison_plots.py), readable at thirty configurations: each
configuration's kind (single sentences, joined pairs, randomized positions, scaled at inference)
gets its own line style and panel, each encoding one colour in every panel, each variant a colour of
its own. (The PNGs themselves are written and checked through compare.py: test_compare.py.)"""

from __future__ import annotations

from settings.config import from_raw
from study.pages.comparison_plots import KINDS, group_styles, kind_of, panels_by_kind
from study.records import Configuration, RunRecord


def group(encoding: str, variant: bool = False, joined: bool = False, randomized: bool = False) -> Configuration:
    config = {
        "data": {"train_concat": {"prob": 0.5 if joined else 0.0}},
        "model": {"positional": {"name": "sinusoidal", "randomized": randomized}},
    }
    return Configuration((RunRecord(run="r", config=from_raw(config)),), encoding, encoding, variant=variant)


def test_each_configuration_has_its_kind_and_its_panel() -> None:
    groups = [
        group("rope"),
        group("rope", joined=True),
        group("sinusoidal", randomized=True),
        group("rope", variant=True),
    ]
    assert [kind_of(g) for g in groups] == list(KINDS)
    assert panels_by_kind([groups[1], groups[0], groups[1]]) == [("single sentences", [1]), ("joined pairs", [0, 2])]


def test_colours_by_encoding_styles_by_kind_and_variants_apart() -> None:
    groups = [group("rope"), group("rope", joined=True), group("alibi"), group("rope", variant=True)]
    styles = group_styles(groups)
    assert styles[0].color == styles[1].color != styles[2].color  # one colour per encoding
    assert styles[0].linestyle != styles[1].linestyle  # its kind: single sentences vs joined pairs
    assert styles[3].color not in (styles[0].color, styles[2].color) and styles[3].marker == "D"
    many = group_styles([group(f"enc{i}") for i in range(12)])
    assert len({str(s.color) for s in many}) == 12  # tab20 beyond ten encodings
