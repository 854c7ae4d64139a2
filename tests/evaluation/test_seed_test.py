"""The seed-level test and the rule that words findings (evaluation/seed_test.py): the test equals
a hand computation, its power and detectable effect agree with each other, the declared family is
read with one-line errors, and — by simulation over every row of the archived findings — the rule
says "ahead"/"behind" for no true difference at most 5% (+ 2 Monte-Carlo SE) of the time, still says
the archived large effects, while the rule used before (one test over the test sentences, seeds
held fixed, unanimity counted as a direction) fails the same simulation."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from evaluation.family import Family
from evaluation.seed_test import (
    ALPHA,
    ONE_SEED,
    detectable_effect,
    direction,
    power,
    seed_p,
    seed_test,
    seeds_needed,
    split_variance,
    verdict,
)
from evaluation.verdicts import apply_rule, unmatched

ROOT = Path(__file__).resolve().parents[2]


SIMULATIONS = 2000


def test_seed_test_equals_a_hand_computation():
    d, v = [0.8, -0.2, 1.1, 0.4], 0.05
    se = math.sqrt(np.var(d, ddof=1) / 4 + v)
    t = np.mean(d) / se
    got = seed_test(d, v)
    assert got.p_value == pytest.approx(2 * stats.t.sf(abs(t), 3))
    half = stats.t.ppf(0.975, 3) * se
    assert (got.low, got.high) == pytest.approx((np.mean(d) - half, np.mean(d) + half))
    # without sentence noise it is the one-sample t-test of the seeds' differences
    assert seed_test(d, 0.0).p_value == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    one = seed_test([1.5], 0.01)
    assert one.p_value is None and one.low is None and one.mean == 1.5


def test_power_and_detectable_effect_agree_and_seeds_needed_is_monotone():
    for se, df, alpha in ((0.3, 2, 0.05), (0.5, 4, 0.05 / 21), (0.1, 9, 0.01)):
        effect = detectable_effect(se, df, alpha)
        assert power(effect, se, df, alpha) == pytest.approx(0.8, abs=2e-3)
        assert power(0.0, se, df, alpha) == pytest.approx(alpha, rel=0.02)  # no effect: the test's size
        nc = 2.0  # against scipy's noncentral t where it is accurate
        crit = stats.t.ppf(1 - alpha / 2, df)
        assert power(nc * se, se, df, alpha) == pytest.approx(
            stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc), abs=2e-3
        )
    small, large = seeds_needed(0.5, 0.7, 0.02, 0.05, 0.05), seeds_needed(1.0, 0.7, 0.02, 0.05, 0.05)
    assert large < small

    def se(n):  # the seeds' spread and the seed-by-sentence noise average out, the shared noise stays
        return math.sqrt(0.7**2 / n + 0.02 + 0.05 / n)

    assert power(1.0, se(large), large - 1, 0.05) >= 0.8 > power(1.0, se(large - 1), large - 2, 0.05)
    assert seeds_needed(0.01, 1.0, 0.5, 0.0, 0.05) is None  # below what the shared test-set noise allows


def test_the_test_sets_noise_splits_into_shared_and_per_seed_parts():
    """Joint bootstrap variance of mean(d) = shared + per-seed / n; each seed's own bootstrap
    variance = shared + per-seed; a NaN difference is no test (never p = 0)."""
    shared, own, n = 0.01, 0.04, 4
    v_shared, v_int = split_variance(shared + own / n, [shared + own] * n, n)
    assert (v_shared, v_int) == (pytest.approx(shared), pytest.approx(own))
    assert split_variance(0.02, None, 3) == (None, None)
    got = seed_test([0.4, 0.5, 0.6, 0.7], shared + own / n, [shared + own] * n)
    assert got.v_shared == pytest.approx(shared) and got.p_value is not None
    assert seed_test([float("nan"), 1.0], 0.1).p_value is None
    assert np.isnan(seed_p(np.array([[float("nan"), 1.0]]), 0.1)[0])


def row(diffs, p_holm, v=0.0, compared_on="test set", config="c"):
    return {
        "config": config,
        "compared_on": compared_on,
        "mean_difference": float(np.mean(diffs)),
        "per_seed": [{"seed": i, "difference": d, "p_value": None} for i, d in enumerate(diffs)],
        "seed_test": vars(seed_test(diffs, v)),
        "p_value": seed_test(diffs, v).p_value,
        "p_holm": p_holm,
    }


def test_only_a_declared_row_beyond_the_margin_is_worded_a_direction():
    clear = row([2.0, 2.5, 1.8, 2.2, 2.1], 0.001)
    assert verdict(clear, "sacreBLEU", 0.1, declared=True).startswith("ahead in every seed")
    assert "ahead" not in verdict(clear, "sacreBLEU", 0.1, declared=False)  # not declared: descriptive
    assert verdict(clear, "NLL", 0.01, declared=True).startswith("behind")  # NLL: lower is better
    tie = row([2.0, 2.5, 1.8, 2.2, 0.05], 0.001)  # one seed within the margin: a tie, not a win
    assert verdict(tie, "sacreBLEU", 0.1, declared=True).startswith("ahead on average")
    against = row([2.0, 2.5, 1.8, 2.2, -0.3], 0.001)  # one seed beyond the margin the other way
    words = verdict(against, "sacreBLEU", 0.1, declared=True)
    assert "ahead" not in words and "seeds: 4 above +0.10, 1 below -0.10, 0 within; 95% interval" in words
    assert ONE_SEED in verdict(row([3.0], None), "sacreBLEU", 0.1, declared=True)


def test_holm_runs_over_the_declared_family_only():
    family = Family(headline=[{"table": "test", "compared_on": "test set"}])
    tables = [
        {
            "name": "test",
            "metric": "sacreBLEU",
            "rows": [row([1.0, 1.1, 0.9], None, config="a"), row([0.5, 0.6, 0.4], None, config="b")],
        },
        {"name": "concat", "metric": "sacreBLEU", "rows": [row([1.0, 1.1, 0.9], None, compared_on="k=2")]},
    ]
    assert apply_rule(tables, family) == 2
    a, b = tables[0]["rows"]
    assert a["declared"] and b["declared"] and not tables[1]["rows"][0]["declared"]
    assert sorted([a["p_holm"], b["p_holm"]]) == pytest.approx(
        sorted([2 * min(a["p_value"], b["p_value"]), max(a["p_value"], b["p_value"])])
    )
    assert tables[1]["rows"][0]["p_holm"] is None and "ahead" not in tables[1]["rows"][0]["finding"]
    # a declared row without a test (one seed) still counts in the family, with p = 1
    tables[0]["rows"].append(row([1.0], None, config="c"))
    assert apply_rule(tables, family) == 3 and tables[0]["rows"][2]["p_holm"] is None
    assert sorted(r["p_holm"] for r in tables[0]["rows"][:2]) == pytest.approx(
        sorted([3 * min(a["p_value"], b["p_value"]), 2 * max(a["p_value"], b["p_value"])])
    )
    typo = Family(headline=[{"table": "test", "compared_on": "test set"}, {"table": "concat", "compared_on": "k=4"}])
    assert unmatched(tables, typo) == ["{'table': 'concat', 'compared_on': 'k=4'}"]


def archived_rows() -> list[dict]:
    """Every row of the committed findings with a seed-level test over two seeds or more."""
    rows = []
    for path in sorted(ROOT.glob("results/**/*_findings.json")):
        findings = json.loads(path.read_text(encoding="utf-8"))
        for table in findings["tables"]:
            for r in table["rows"]:
                t = r.get("seed_test")
                if t and t["n"] >= 2 and t["seed_sd"] is not None and t.get("v_shared") is not None:
                    rows.append(
                        {
                            **t,
                            "metric": table["metric"],
                            "margin": findings["tie_margin"][table["metric"]],
                            "where": f"{path.name}: {r['config']} {r['compared_on']}",
                        }
                    )
    return rows


def simulate(rows: list[dict], rule, effect_in_sd: float = 0.0, observed: bool = False, seed: int = 0):
    """Per row, the fraction of simulated studies in which `rule(diffs, v_sent, margin)` words a
    direction (+1/-1) matching the true effect's sign (any direction when there is none). Seed
    effects: normal and t(3), scaled so that with the test set's per-seed noise (variance v_int,
    one draw per seed) they have the row's seed SD; the test set's shared noise: one normal draw of
    variance v_shared for every seed (the same test sentences)."""
    rng = np.random.default_rng(seed)
    out = {}
    for dist in ("normal", "t3"):
        rates = []
        for r in rows:
            n, sd, v = r["n"], r["seed_sd"], r["v_sent"]
            shared, own = r["v_shared"], r["v_int"]
            effect_sd = math.sqrt(max(sd * sd - own, 0.0))
            if dist == "normal":
                e = rng.standard_normal((SIMULATIONS, n))
            else:
                e = rng.standard_t(3, (SIMULATIONS, n)) / math.sqrt(3.0)  # unit variance
            true = r["mean"] if observed else effect_in_sd * sd
            diffs = (
                true
                + effect_sd * e
                + math.sqrt(own) * rng.standard_normal((SIMULATIONS, n))
                + math.sqrt(shared) * rng.standard_normal((SIMULATIONS, 1))
            )
            said = rule(diffs, v, r["margin"])
            rates.append(np.mean(said != 0) if true == 0 else np.mean(said == np.sign(true)))
        out[dist] = np.array(rates)
    return out


def todays_rule(diffs: np.ndarray, v_sent, margin: float) -> np.ndarray:
    """The rule before issue 43: a direction when every seed's difference has one sign (any size), or
    when one test over the test sentences (seeds held fixed: the mean difference against the sentence
    bootstrap alone, Koehn's one-tailed statistic) is below 0.05."""
    mean = diffs.mean(-1)
    unanimous = (diffs > 0).all(-1) | (diffs < 0).all(-1)
    with np.errstate(divide="ignore"):
        p = stats.norm.sf(np.abs(mean) / math.sqrt(max(v_sent, 1e-12)))
    return np.where(unanimous | (p < ALPHA), np.sign(mean), 0)


def todays_production_rule(diffs: np.ndarray, v_sent, margin: float) -> np.ndarray:
    """The rule as the findings apply it to one declared comparison (a family of one)."""
    return direction(diffs, seed_p(diffs, v_sent), margin)


@pytest.fixture(scope="module")
def rows():
    found = archived_rows()
    assert len(found) >= 50, "the archived findings hold the seed-level test (make results)"
    return found


def false_positive_bound(rates: np.ndarray) -> float:
    return ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / (len(rates) * SIMULATIONS))


def test_the_rule_is_calibrated_with_no_true_difference(rows):
    null = simulate(rows, todays_production_rule)
    for dist, rates in null.items():
        print(
            f"{dist}: says a direction for no true difference in {rates.mean():.2%} of {len(rows)} rows x "
            f"{SIMULATIONS} studies (worst row {rates.max():.1%})"
        )
        assert rates.mean() <= false_positive_bound(rates), dist
    power = {k: simulate(rows, todays_production_rule, effect_in_sd=k, seed=k) for k in (1, 2, 3)}
    for k, by_dist in power.items():
        print(f"power at {k} seed SD: " + ", ".join(f"{d} {r.mean():.1%}" for d, r in by_dist.items()))
        assert by_dist["normal"].mean() > null["normal"].mean()


def test_the_rule_still_says_the_archived_large_effects(rows):
    large = [r for r in rows if r["se"] and abs(r["mean"]) / r["se"] > 10 and abs(r["mean"]) > 3 * r["margin"]]
    assert large, "the archive holds large effects (joined-pair training at k = 2)"
    said = simulate(large, todays_production_rule, observed=True)
    for dist, rates in said.items():
        print(f"{dist}: says {len(large)} large archived effects in {rates.mean():.1%} of studies")
        assert rates.mean() >= 0.9, dist


def test_the_rule_before_issue_43_fails_the_calibration(rows):
    """The simulation can fail: the earlier rule says a direction far more often than 5%."""
    null = simulate(rows, todays_rule)
    print("the earlier rule, no true difference: " + ", ".join(f"{d} {r.mean():.1%}" for d, r in null.items()))
    assert all(rates.mean() > false_positive_bound(rates) for rates in null.values())


def test_every_archived_direction_is_a_declared_comparison_that_passed():
    """In every committed findings file: a row worded ahead/behind is declared, its Holm p (two-sided
    seed-level test) is below 0.05 and no seed lies beyond the tie margin the other way; no row says
    'significant'; the file names its test."""
    files = sorted(ROOT.glob("results/**/*_findings.json"))
    assert files
    directions = 0
    for path in files:
        findings = json.loads(path.read_text(encoding="utf-8"))
        assert "two-sided" in findings["test"] and "Student's t" in findings["test"], path
        for table in findings["tables"]:
            margin = findings["tie_margin"][table["metric"]]
            for r in table["rows"]:
                assert "significant" not in r["finding"], (path.name, r["config"], r["compared_on"])
                # a row beyond a joined-pair model's training range says so first, then its verdict
                wording = re.sub(r"^beyond the joined training range \(k > \d+\); ", "", r["finding"])
                if not wording.startswith(("ahead", "behind")):
                    assert not re.search(r"\b(ahead|behind)\b", wording), r["finding"]
                    continue
                directions += 1
                diffs = [s["difference"] for s in r["per_seed"]]
                up = r["mean_difference"] > 0
                assert r["declared"] and r["p_holm"] < ALPHA, (path.name, r["config"], r["compared_on"])
                assert not any(d < -margin if up else d > margin for d in diffs), (path.name, r["config"])
    # the archive's large effect (joined-pair training) is still said, unless every declared study is interim
    declared_studies = [f for f in (json.loads(p.read_text(encoding="utf-8")) for p in files) if f.get("family")]
    assert directions >= 1 or all(f.get("interim") for f in declared_studies)
