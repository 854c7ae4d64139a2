"""The declared family file (study/read/family.py), strictly read: each mistake one line naming the
file and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from settings.config import ConfigError
from study.read.family import load_family
from study.records import ComparisonRow

ROOT = Path(__file__).resolve().parents[3]


def test_family_file_errors_are_one_line(tmp_path):
    good = tmp_path / "f.yaml"
    good.write_text(
        "baseline: sinusoidal\nheadline:\n  - {table: test, compared_on: test set}\ntie_margin: {NLL: 0.02}\n"
    )
    family = load_family(str(good))
    assert family.baseline == "sinusoidal" and family.tie_margin == {"sacreBLEU": 0.1, "NLL": 0.02}
    assert family.declares("test", ComparisonRow(config="x", compared_on="test set"))
    assert not family.declares("test", ComparisonRow(config="x", compared_on="k=2"))
    assert family.seeds is None and family.equivalence == {}
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "headline: [{table: test}]\nseeds: [1234, 1, 2]\ndevice: cpu\nprecision: fp32\n"
        "equivalence: {sacreBLEU: 1.0, NLL: 0.1}\n"
    )
    family = load_family(str(plan))
    assert (family.seeds, family.device, family.precision) == ([1234, 1, 2], "cpu", "fp32")
    assert family.equivalence == {"sacreBLEU": 1.0, "NLL": 0.1}
    for text, says in (
        ("headline: [{table: test}]\nseeds: [1, 1]\n", "seeds must be"),
        ("headline: [{table: test}]\nseeds: [1.5]\n", "seeds must be"),
        ("headline: [{table: test}]\ndevice: gpu\n", "device must be"),
        ("headline: [{table: test}]\nprecision: fp8\n", "precision must be"),
        ("headline: [{table: test}]\nequivalence: {NLL: 0}\n", "equivalence.NLL must be a finite number > 0"),
        ("headline: [{table: test}]\ntie_margin: {bleu: 5.0}\n", "tie_margin.bleu is not a unit of the tables"),
        ("headline: [{table: test}]\ntie_margin: {NLL: .nan}\n", "tie_margin.NLL must be a finite number"),
        ("headline: [{table: test}]\neffect: {NLL: .inf}\n", "effect.NLL must be a finite number"),
        ("headline: [{table: test}]\ntie_margin: {NLL: true}\n", "tie_margin.NLL must be a finite number"),
        ("headline: [{table: test}]\nheadline: [{table: concat}]\n", "duplicate key 'headline'"),
        ("headline: [{table: test, configs: demo/ropeX}]\n", "configs must be a list of configurations"),
        ("headline: [{table: test, configs: [demo/ropeX]}]\n", "configs/demo/ropeX.yaml does not exist"),
        ("headline: [{table: tests}]\n", "'tests' is not a findings table"),
        (
            "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
            "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
            "e: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nheadline: [{table: test}]\n",
            "expand to",
        ),
        ("headline: []\n", "non-empty 'headline'"),
        ("headline:\n  - {k: 2}\n", "headline[0]"),
        ("headline:\n  - {table: test}\nalpha: 0.1\n", "unknown key(s) alpha"),
        ("headline:\n  - {table: test}\ntie_margin: {NLL: -1}\n", "must be a finite number >= 0"),
        ("headline: [\n", "not valid YAML"),
    ):
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
    seeds = ", ".join(str(s) for s in range(101, 121))
    path.write_text(
        f"rule: beyond_tie\nheadline: [{{table: test}}]\nseeds: [{seeds}]\nlooks: [8, 12, 16, 20]\nspending: pocock\n"
    )
    family = load_family(str(path))
    assert family.looks == (8, 12, 16, 20) and family.plan.fractions == (0.4, 0.6, 0.8, 1.0)
    assert (family.plan.spending, family.plan.spending_equivalence) == ("pocock", "obrien-fleming")
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text("headline: [{table: test}]\nseeds: [1, 2, 3]\n")
    assert load_family(str(fixed)).plan is None
    head = f"rule: beyond_tie\nheadline: [{{table: test}}]\nseeds: [{seeds}]\n"
    for text, says in (
        (head + "looks: [12, 8, 20]\n", "looks must be increasing seed counts"),
        (head + "looks: [1, 20]\n", "looks must be increasing seed counts of at least 2"),
        (head + "looks: [8, 16]\n", "the last look (16) is every planned seed, but the family plans 20 seeds"),
        (head + "looks: [8, 20]\nspending: haybittle\n", "spending 'haybittle' is not a spending function"),
        (head + "spending: pocock\n", "spending is a sequential plan's: give looks too"),
        (head.replace("rule: beyond_tie\n", "") + "looks: [8, 20]\n", "a sequential plan (looks) is read under"),
    ):
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
