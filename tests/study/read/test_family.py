"""The declared family file (study/read/family.py), strictly read: each mistake one line naming the
file and key."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest

from settings.config import ConfigError
from study.read.family import Family, load_family
from study.terms import Joined, RowKey, WholeTestSet

ROOT = Path(__file__).resolve().parents[3]


T = "headline: [{table: test}]\n"
# Every family file the loader refuses, with what its one line says and whether configs/family.schema.json
# refuses it too (False: what no JSON Schema says, a rule across keys, a file that must exist, or YAML
# itself; tests/tools/test_config_schemas.py holds the schema to it, both ways)
REFUSED = [
    (
        T + "seeds: [1, 1]\n",
        "seeds must be a non-empty list of distinct integers (the planned seeds), got [1, 1]",
        True,
    ),
    (T + "seeds: [1.5]\n", "seeds must be", True),
    (T + "seeds: [true]\n", "seeds must be", True),
    (T + "seeds: []\n", "seeds must be", True),
    (T + "seeds: !!set {1, 2}\n", "seeds must be", True),
    (T + "seeds: [4294967296]\n", "seeds holds 4294967296, which train.py refuses", True),
    (T + "seeds: [1, -3]\n", "seeds holds -3, which train.py refuses as a seed: each is an integer from 0 to", True),
    (T + f"seeds: [1, {10**23}]\n", f"seeds holds {10**23}, which train.py refuses as a seed", True),
    (T + "device: gpu\n", "device must be cpu, cuda or mps (the device kind of every run), got 'gpu'", True),
    (T + "precision: fp8\n", "precision must be one of fp32, bf16, fp16, got 'fp8'", True),
    (T + "equivalence: {NLL: 0}\n", "equivalence.NLL must be a finite number > 0, got 0", True),
    (T + "equivalence: {NLL: null}\n", "equivalence.NLL must be a finite number > 0, got None", True),
    (T + "tie_margin: {bleu: 5.0}\n", "tie_margin.bleu is not a unit of the tables; use sacreBLEU or NLL", True),
    (T + "tie_margin: {NLL: .nan}\n", "tie_margin.NLL must be a finite number >= 0, got nan", False),  # (no JSON)
    (T + "effect: {NLL: .inf}\n", "effect.NLL must be a finite number", False),  # (no JSON value)
    (T + "tie_margin: {NLL: true}\n", "tie_margin.NLL must be a finite number >= 0, got True", True),
    (T + "tie_margin: {NLL: '0.1'}\n", "tie_margin.NLL must be a finite number", True),
    (T + "tie_margin: {NLL: -1}\n", "tie_margin.NLL must be a finite number >= 0, got -1", True),
    (T + "tie_margin: 5\n", "tie_margin must be a mapping of units (sacreBLEU, NLL) to numbers, got 5", True),
    (T + "tie_margin: null\n", "tie_margin must be a mapping of units", True),
    (T + "headline: [{table: concat}]\n", "duplicate key 'headline'", False),
    ("headline: [{table: test, configs: demo/ropeX}]\n", "configs must be a list of configurations", True),
    ("headline: [{table: test, configs: [5]}]\n", "headline[0].configs must be a list of configurations", True),
    ("headline: [{table: test, configs: [demo/ropeX]}]\n", "configs/demo/ropeX.yaml does not exist", False),
    ("headline: [{table: tests}]\n", "headline[0].table 'tests' is not a findings table (degradation, test,", True),
    ("headline: [{table: test, compared_on: 5}]\n", "headline[0].compared_on must be a row label", True),
    ("headline: [{table: test, compared_on: null}]\n", "headline[0].compared_on must be a row label", True),
    ("headline: [{table: test, compared_on: ''}]\n", "headline[0].compared_on must be a row label", True),
    (
        "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nheadline: [{table: test}]\n",
        "expand to",
        False,
    ),
    ("headline: []\n", "expected a mapping with a non-empty 'headline' list of comparisons ({table: test|", True),
    ("headline: {table: test}\n", "non-empty 'headline'", True),
    ("seeds: [1]\n", "non-empty 'headline'", True),
    ("- {table: test}\n", "expected a mapping with a non-empty 'headline' list of comparisons", True),
    ("headline:\n  - {k: 2}\n", "headline[0] must be {table: ..., compared_on: ..., configs: [...]} (table", True),
    ("headline:\n  - 5\n", "headline[0] must be", True),
    ("headline:\n  - {table: test, k: 2}\n", "headline[0] must be", True),
    (T + "alpha: 0.1\nbeta: 2\n", "unknown key(s) alpha, beta; the keys are baseline, headline, rule,", True),
    (T + "baseline: 5\n", "baseline must be a configuration label or an encoding, got 5", True),
    (T + "baseline: sinusiodal\n", "baseline 'sinusiodal' is neither an encoding", False),
    (T + "baseline: demo/ropee\n", "nor a configuration (configs/demo/ropee.yaml does not exist)", False),
    (T + "rule: nope\n", "rule 'nope' is not a decision rule; use beyond_tie_exact, beyond_tie or seed_veto", True),
    (T + "rule: null\n", "rule None is not a decision rule", True),
    ("headline: [\n", "not valid YAML", False),
]
SEEDS = ", ".join(str(s) for s in range(101, 121))
PLAN = f"rule: beyond_tie\nheadline: [{{table: test}}]\nseeds: [{SEEDS}]\n"
REFUSED_PLANS = [
    (PLAN + "looks: [12, 8, 20]\n", "looks must be increasing seed counts", False),
    (PLAN + "looks: [8, 8, 20]\n", "looks must be increasing seed counts", True),
    (PLAN + "looks: [1, 20]\n", "looks must be increasing seed counts of at least 2 (e.g. [8, 12, 16, 20]), got", True),
    (PLAN + "looks: []\n", "looks must be increasing seed counts", True),
    (PLAN + "looks: [8, 16]\n", "the last look (16) is every planned seed, but the family plans 20 seeds", False),
    (T + "looks: [2, 3]\n", "the last look (3) is every planned seed, but the family plans no seeds", False),
    (PLAN + "looks: [8, 20]\nspending: haybittle\n", "spending 'haybittle' is not a spending function", True),
    (PLAN + "looks: [8, 20]\nspending_equivalence: 2\n", "spending_equivalence 2 is not a spending function", True),
    (PLAN + "spending: pocock\n", "spending is a sequential plan's: give looks too", False),
    (PLAN.replace("rule: beyond_tie\n", "") + "looks: [8, 20]\n", "a sequential plan (looks) is read under", False),
]


def test_family_file_errors_are_one_line(tmp_path):
    good = tmp_path / "f.yaml"
    good.write_text(
        "baseline: sinusoidal\nheadline:\n  - {table: test, compared_on: test set}\ntie_margin: {NLL: 0.02}\n"
    )
    family = load_family(str(good))
    assert family.baseline == "sinusoidal" and family.tie_margin.given() == {"sacreBLEU": 0.1, "NLL": 0.02}
    assert family.declares(RowKey("test", "x", WholeTestSet()))
    assert not family.declares(RowKey("concat", "x", Joined(2))) and not family.declares(RowKey("test", "x", Joined(2)))
    assert family.seeds is None and family.equivalence.given() == {}
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "headline: [{table: test}]\nseeds: [1234, 1, 2]\ndevice: cpu\nprecision: fp32\n"
        "equivalence: {sacreBLEU: 1.0, NLL: 0.1}\n"
    )
    family = load_family(str(plan))
    assert (family.seeds, family.device, family.precision) == ((1234, 1, 2), "cpu", "fp32")
    assert family.equivalence.given() == {"sacreBLEU": 1.0, "NLL": 0.1}
    for text, says, _ in REFUSED:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(says)) as e:
            load_family(str(bad))
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_family(str(tmp_path / "missing.yaml"))


def test_a_sequential_plan_is_read_and_checked(tmp_path) -> None:
    """Issue 69: `looks` (seeds per configuration at each look, the last every planned seed) and each
    test family's spending; a family without looks is a fixed-seed one, as before."""
    path = tmp_path / "sequential.yaml"
    path.write_text(PLAN + "looks: [8, 12, 16, 20]\nspending: pocock\n")
    family = load_family(str(path))
    assert family.looks == (8, 12, 16, 20) and family.plan.fractions == (0.4, 0.6, 0.8, 1.0)
    assert (family.plan.spending, family.plan.spending_equivalence) == ("pocock", "obrien-fleming")
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text("headline: [{table: test}]\nseeds: [1, 2, 3]\n")
    assert load_family(str(fixed)).plan is None
    for text, says, _ in REFUSED_PLANS:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(says)) as e:
            load_family(str(bad))
        assert "\n" not in str(e.value) and str(bad) in str(e.value)


@pytest.mark.parametrize(
    "text, says",
    [
        ("seeds: [1, -3]\n", "seeds holds -3, which train.py refuses as a seed: each is an integer from 0 to"),
        (f"seeds: [1, {10**23}]\n", f"seeds holds {10**23}, which train.py refuses as a seed"),
        ("baseline: sinusiodal\n", "baseline 'sinusiodal' is neither an encoding"),
        ("baseline: demo/ropee\n", "nor a configuration (configs/demo/ropee.yaml does not exist)"),
    ],
)
def test_a_family_is_refused_when_read_as_the_commands_would_refuse_it_later(tmp_path, text: str, says: str) -> None:
    """Issue 75: a seed train.py refuses (-3, 10^23) was accepted and failed only when the runner
    reached its look (never, for a later look); a misspelled baseline was accepted with a note (the
    study interim for good). compare.py --family refuses both in one line naming the file and key."""
    from helpers import one_error_line
    from in_process import run_in_process

    family = tmp_path / "headline.yaml"
    family.write_text("headline: [{table: test}]\n" + text)
    runs = [str(ROOT / "results" / "demo" / name) for name in ("sinusoidal", "rope")]
    line = one_error_line(run_in_process(["compare.py", *runs, "--family", str(family), "--no_significance"]))
    assert str(family) in line and says in line
    if "sinusiodal" in text:
        assert "Did you mean 'sinusoidal'?" in line
    for good in ("baseline: sinusoidal\nseeds: [0, 4294967295]\n", "baseline: demo/rope\n"):
        family.write_text("headline: [{table: test}]\n" + good)
        assert load_family(str(family)).baseline in ("sinusoidal", "demo/rope")


def test_the_family_is_a_frozen_typed_model_whose_rules_hold_however_it_is_made() -> None:
    """Issue 76: the family is a frozen pydantic model (no dict of dicts): its entries and margins are
    typed, nothing can be written into it, and the rules across keys (here the looks) are the model's,
    holding for a family made in code as for one read from a file (configs and baseline existence:
    only for a file, whose folder of configs the reader gives)."""
    family = load_family(str(ROOT / "configs/demo_confirm/findings/headline.yaml"))
    assert family.path.endswith("headline.yaml") and family.plan.looks == (8, 12, 16, 20)
    (entry,) = family.headline
    assert (entry.table, entry.compared_on, entry.configs) == ("test", "test set", None)
    assert (family.tie_margin.sacreBLEU, family.equivalence.of("NLL"), family.effect.of("BLEU")) == (0.1, 0.1, None)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        family.seeds = (1, 2)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        entry.table = "concat"
    seeds = tuple(range(101, 121))
    with pytest.raises(pydantic.ValidationError, match="looks must be increasing seed counts"):
        Family(headline=[{"table": "test"}], seeds=seeds, looks=(12, 8, 20), rule="beyond_tie")
    with pytest.raises(pydantic.ValidationError, match="the last look"):
        Family(headline=[{"table": "test"}], seeds=seeds, looks=(8, 16), rule="beyond_tie")
    made = Family(headline=[{"table": "test", "configs": ["x/none"]}], seeds=seeds, looks=(8, 20), rule="beyond_tie")
    assert made.plan.looks == (8, 20) and made.path is None


def test_an_entry_names_its_rows_by_the_selection_its_compared_on_spells() -> None:
    """Issue 76: a headline entry's `compared_on` is read into its typed selection when the family is
    loaded, and rows are matched by selection, never by label; only a row label's exact spelling names
    it (a near miss names no row, and study/judge/verdicts.check_entries refuses it in one line)."""
    from study.read.family import HeadlineEntry, selection_of
    from study.terms import ALL_K, LengthBucket, NllBeyond, Span, SpanKind

    every = [WholeTestSet(), Joined(4), LengthBucket("0-7"), LengthBucket("128+"), NllBeyond(), ALL_K]
    every += [Span(SpanKind.BEYOND_JOINED, 4), Span(SpanKind.AT_K, 8), Span(SpanKind.START_WITHIN)]
    every += [Span(SpanKind.START_BEYOND), Span(SpanKind.START_BUCKET, start=(16, 24))]
    every += [Span(SpanKind.START_BUCKET, start=(128, None))]
    assert [selection_of(on.label) for on in every] == every
    near_misses = ("k=04", "test sett", "k = 4", "degradation, k=4 ", "7 tokens")
    assert [selection_of(text) for text in near_misses] == [None] * 5
    entry = HeadlineEntry(table="concat", compared_on="k=4")
    assert entry.names(RowKey("concat", "x", Joined(4))) and not entry.names(RowKey("concat", "x", Joined(8)))
    assert not entry.names(RowKey("degradation", "x", Span(SpanKind.AT_K, 4)))
    assert not HeadlineEntry(table="concat", compared_on="k=04").names(RowKey("concat", "x", Joined(4)))
