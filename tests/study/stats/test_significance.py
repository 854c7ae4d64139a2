"""Paired bootstrap significance (study/stats/significance.py) against sacreBLEU's own PairedTest."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample

from study.stats import significance
from study.stats.significance import (
    DEFAULT_SEED,
    bleu_from_stats,
    holm,
    holm_rows,
    paired_bootstrap_seeds,
    resample_counts,
    sentence_stats,
)

WORDS = (
    "the a cat dog house car man woman child city river tree book letter friend teacher "
    "sees likes reads writes buys finds wants opens takes gives old new big small red green "
    "quickly slowly today yesterday here there in on at with from under near and but"
).split()


def _references(n: int = 300) -> list[str]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(n):
        words = [WORDS[i] for i in rng.integers(len(WORDS), size=rng.integers(3, 26))]
        out.append(" ".join(words).capitalize() + ".")
    return out


REFS = _references()


def _noisy(noise: float, seed: int, refs: list[str] = REFS) -> list[str]:
    """A synthetic 'system output': each word substituted or deleted with probability noise."""
    rng = np.random.default_rng(seed)
    out = []
    for ref in refs:
        kept = []
        for word in ref[:-1].split():
            r = rng.random()
            if r < noise * 0.6:
                kept.append(WORDS[rng.integers(len(WORDS))])
            elif r >= noise:
                kept.append(word)
        out.append(" ".join(kept) + ".")
    return out


def _sacrebleu_bs(base: list[str], system: list[str], refs: list[str], n_samples: int):
    """(p-value, system score - baseline score) from sacreBLEU's paired bootstrap, default seed."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SACREBLEU_SEED", raising=False)
        _, scores = PairedTest(
            [("base", base), ("sys", system)], {"BLEU": BLEU()}, references=[refs], test_type="bs", n_samples=n_samples
        )()
    base_res, sys_res = scores["BLEU"]
    return sys_res.p_value, sys_res.score - base_res.score


# (baseline noise, baseline seed, system noise, system seed): a large and two small differences.
PAIRS = {"large": (0.40, 1, 0.15, 2), "small": (0.30, 3, 0.29, 4), "worse": (0.25, 5, 0.27, 6)}


# --- BLEU from statistics ------------------------------------------------------------------------


def _random_stats(rng: np.random.Generator, rows: int, scale: int) -> np.ndarray:
    sys_len = rng.integers(0, scale, rows)
    ref_len = np.maximum(0, sys_len + rng.integers(-scale // 4, scale // 4, rows))
    total = np.stack([np.maximum(sys_len - k * rng.integers(1, 50, rows), 0) for k in range(4)], 1)
    correct = np.floor(total * rng.uniform(0, 1, (rows, 1)) ** np.arange(1, 5)).astype(np.int64)
    correct[rng.random((rows, 4)) < 0.1] = 0  # some orders without a match: exp smoothing
    return np.concatenate([sys_len[:, None], ref_len[:, None], correct, total], 1)


EDGE_ROWS = np.array(
    [
        [10, 12, 0, 0, 0, 0, 10, 9, 8, 7],  # no matches at all
        [5, 5, 3, 1, 0, 0, 5, 4, 3, 2],  # zero correct at orders 3 and 4 (smoothing)
        [2, 5, 2, 1, 0, 0, 2, 1, 0, 0],  # no 3-grams: sacreBLEU breaks at order 3
        [3, 5, 3, 2, 1, 0, 3, 2, 1, 0],  # no 4-grams: breaks at order 4
        [0, 7, 0, 0, 0, 0, 0, 0, 0, 0],  # empty output
        [0, 7, 1, 0, 0, 0, 1, 1, 1, 1],  # sys_len 0 with matches (bp = 0)
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # nothing at all
        [40, 30, 30, 20, 10, 5, 40, 39, 38, 37],  # longer than the reference: bp = 1
        [30, 40, 30, 20, 10, 5, 30, 29, 28, 27],  # shorter: bp < 1
        [30, 30, 30, 29, 28, 27, 30, 29, 28, 27],  # perfect
        [900001, 900000, 700001, 500003, 300007, 200011, 900001, 899001, 898001, 897001],  # 100*c inexact in float32
    ],
    dtype=np.int64,
)


def test_bleu_from_stats_is_bit_identical_to_sacrebleu_float32_rows():
    rng = np.random.default_rng(0)
    # Many large rows: numpy's SIMD log differs from math.log on a few in 10^4 of them (AVX-512).
    rows = np.concatenate([EDGE_ROWS, _random_stats(rng, 1500, 60), _random_stats(rng, 20000, 2_000_000)])
    rows32 = rows.astype(np.float32)
    metric = BLEU()
    expected = np.array([metric._compute_score_from_stats(row).score for row in rows32])
    ours = bleu_from_stats(rows32)
    assert ours.dtype == np.float64 and ours.shape == (len(rows),)
    mismatches = np.flatnonzero(ours != expected)
    assert mismatches.size == 0, (rows[mismatches[:5]], ours[mismatches[:5]], expected[mismatches[:5]])
    # The rows exercise the float32 arithmetic: float64 precisions would give other scores.
    assert np.any(bleu_from_stats(rows, float32=False) != expected)
    # Batched shapes and single rows agree with the flat computation.
    assert np.array_equal(bleu_from_stats(rows32[:1500].reshape(30, 50, 10)), ours[:1500].reshape(30, 50))
    assert float(bleu_from_stats(rows32[8])) == expected[8]
    assert expected[: len(EDGE_ROWS)][[0, 2, 3, 4, 5, 6]].tolist() == [0.0] * 6
    assert expected[9] == pytest.approx(100.0)


def test_bleu_from_stats_float64_matches_the_observed_corpus_score():
    rng = np.random.default_rng(1)
    rows = np.concatenate([EDGE_ROWS, _random_stats(rng, 500, 2_000_000)])
    metric = BLEU()
    expected = [metric._compute_score_from_stats([int(v) for v in row]).score for row in rows]
    assert bleu_from_stats(rows.astype(np.float64), float32=False).tolist() == expected


def test_sentence_stats_sum_to_the_corpus_score():
    hyps = _noisy(0.3, 11)
    stats = sentence_stats(hyps, REFS)
    assert stats.shape == (len(REFS), 10) and stats.dtype == np.float64
    assert float(bleu_from_stats(stats.sum(0), float32=False)) == BLEU().corpus_score(hyps, [REFS]).score
    with pytest.raises(ValueError):
        sentence_stats(hyps[:-1], REFS)


# --- resampling counts ----------------------------------------------------------------------------


def test_resample_counts_are_sacrebleus_draws():
    n, n_samples = 37, 500
    counts = resample_counts(n, n_samples)
    draws = np.random.default_rng(DEFAULT_SEED).choice(n, size=(n_samples, n), replace=True)
    assert counts.dtype == np.float32 and counts.shape == (n_samples, n)
    assert np.all(counts.sum(1) == n)
    assert np.array_equal(counts, np.stack([np.bincount(row, minlength=n) for row in draws]))
    assert resample_counts(n, n_samples, DEFAULT_SEED) is counts  # memoised
    assert not counts.flags.writeable
    assert not np.array_equal(resample_counts(n, n_samples, seed=1), counts)
    # Larger than one bincount block: the blocks are stitched in the right rows.
    big = resample_counts(3000, 200, seed=5)
    draws = np.random.default_rng(5).choice(3000, size=(200, 3000), replace=True)
    assert np.array_equal(big, np.stack([np.bincount(row, minlength=3000) for row in draws]))


# --- the paired test against sacreBLEU ------------------------------------------------------------


@pytest.fixture(scope="module")
def outputs() -> dict:
    out = {}
    for name, (bn, bs, sn, ss) in PAIRS.items():
        base, system = _noisy(bn, bs), _noisy(sn, ss)
        out[name] = (base, system, sentence_stats(base, REFS), sentence_stats(system, REFS))
    return out


@pytest.mark.parametrize("n_samples", [1000, 2000])
@pytest.mark.parametrize("pair", list(PAIRS))
def test_one_seed_p_value_equals_sacrebleu(outputs, pair, n_samples):
    base, system, base_stats, sys_stats = outputs[pair]
    expected_p, expected_diff = _sacrebleu_bs(base, system, REFS, n_samples)
    result = paired_bootstrap_seeds([sys_stats], [base_stats], n_samples=n_samples)
    assert result.p_value == expected_p
    assert result.per_seed == [expected_diff] and result.difference == expected_diff
    assert result.n_samples == n_samples
    if pair == "large":
        assert expected_p == 1 / (n_samples + 1)
    else:  # a p-value away from the floor: every resample's score has to agree
        assert 0.02 < expected_p < 0.98


def test_resampled_scores_are_sacrebleus(outputs, monkeypatch):
    """Every resample's BLEU inside the test equals sacreBLEU's own bootstrap resample score."""
    _, _, base_stats, sys_stats = outputs["small"]
    seen = []
    original = significance.bleu_from_stats

    def spy(totals, **kwargs):
        scores = original(totals, **kwargs)
        seen.append((kwargs, scores))
        return scores

    monkeypatch.setattr(significance, "bleu_from_stats", spy)
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    paired_bootstrap_seeds([sys_stats], [base_stats], n_samples=1000)
    resampled = [scores for kwargs, scores in seen if kwargs.get("float32", True)]
    assert len(resampled) == 1 and resampled[0].shape == (1000, 2)
    for column, stats in enumerate([sys_stats, base_stats]):
        _, expected = _bootstrap_resample(stats.astype(int).tolist(), BLEU(), 1000)
        assert resampled[0][:, column].tolist() == [score.score for score in expected]


@pytest.mark.parametrize("kind", ["mask", "indices"])
def test_subset_equals_sacrebleu_on_the_subset_files(outputs, kind):
    base, system, base_stats, sys_stats = outputs["small"]
    mask = np.array([len(r.split()) > 12 for r in REFS])
    subset = mask if kind == "mask" else np.flatnonzero(mask)
    pick = lambda lines: [line for line, keep in zip(lines, mask) if keep]  # noqa: E731
    expected_p, expected_diff = _sacrebleu_bs(pick(base), pick(system), pick(REFS), 1000)
    result = paired_bootstrap_seeds([sys_stats], [base_stats], n_samples=1000, subset=subset)
    assert (result.p_value, result.difference) == (expected_p, expected_diff)
    assert 0.02 < expected_p < 0.98 and mask.sum() < len(REFS)


# --- several seeds --------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", list(PAIRS))
def test_repeating_one_seed_gives_the_one_seed_p_value(outputs, pair):
    _, _, base_stats, sys_stats = outputs[pair]
    one = paired_bootstrap_seeds([sys_stats], [base_stats], n_samples=2000)
    for repeats in (2, 3):
        many = paired_bootstrap_seeds([sys_stats] * repeats, [base_stats] * repeats, n_samples=2000)
        assert many.p_value == one.p_value
        assert many.difference == one.difference and many.per_seed == one.per_seed * repeats


def test_identical_outputs_give_p_one(outputs):
    _, _, base_stats, _ = outputs["small"]
    result = paired_bootstrap_seeds([base_stats] * 2, [base_stats.copy()] * 2, n_samples=500)
    assert (result.p_value, result.difference, result.per_seed) == (1.0, 0.0, [0.0, 0.0])


def test_consistent_gain_over_three_seeds_is_more_significant_than_one():
    bases = [sentence_stats(_noisy(0.30, 100 + s), REFS) for s in range(3)]
    systems = [sentence_stats(_noisy(0.28, 200 + s), REFS) for s in range(3)]
    one = paired_bootstrap_seeds(systems[:1], bases[:1], n_samples=2000)
    three = paired_bootstrap_seeds(systems, bases, n_samples=2000)
    assert all(d > 0 for d in three.per_seed)
    assert three.difference == pytest.approx(np.mean(three.per_seed))
    assert three.p_value < one.p_value
    assert one.p_value > 0.05 and three.p_value < 0.05


def test_bad_inputs_are_rejected(outputs):
    _, _, base_stats, sys_stats = outputs["small"]
    with pytest.raises(ValueError):
        paired_bootstrap_seeds([sys_stats, sys_stats], [base_stats])
    with pytest.raises(ValueError):
        paired_bootstrap_seeds([sys_stats], [base_stats[:-1]])
    with pytest.raises(ValueError):
        paired_bootstrap_seeds([sys_stats], [base_stats], subset=np.zeros(5, dtype=bool))


# --- multiple comparisons and Monte Carlo error ---------------------------------------------------


def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert holm([0.001, 0.02, 0.5, 0.04]) == pytest.approx([0.004, 0.06, 0.5, 0.08])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([None, 0.2]) == [None, 0.2]
    assert holm([]) == [] and holm([None]) == [None]
    p = np.array([[0.01, 0.04, 0.03], [0.5, 0.6, 0.001]])  # vectorised: each row a family of its own
    assert holm_rows(p) == pytest.approx(np.array([[0.03, 0.06, 0.06], [1.0, 1.0, 0.003]]))


def test_holm_is_monotone_and_never_below_the_raw_p():
    rng = np.random.default_rng(3)
    raw = [float(p) for p in rng.uniform(0, 0.2, 12)]
    adjusted = holm(raw)
    order = np.argsort(raw)
    assert all(a >= p for a, p in zip(adjusted, raw)) and max(adjusted) <= 1.0
    assert np.all(np.diff(np.array(adjusted)[order]) >= 0)


# ---------------------------------------------------------------------------- ratio statistics (teacher-forced NLL)


def _ratio_reference(systems, baselines, n_samples, seed):
    """The same test written as a loop: sacreBLEU's draws, each resample's mean over seeds of the
    ratio differences, Koehn's centred statistic with the +1 correction."""
    n = systems[0].shape[0]
    draws = np.random.default_rng(seed).choice(n, size=(n_samples, n), replace=True)
    observed = np.mean(
        [s[:, 0].sum() / s[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum() for s, b in zip(systems, baselines)]
    )
    sample = []
    for idx in draws:
        diffs = [
            s[idx, 0].sum() / s[idx, 1].sum() - b[idx, 0].sum() / b[idx, 1].sum() for s, b in zip(systems, baselines)
        ]
        sample.append(abs(np.mean(diffs)))
    sample = np.array(sample)
    count = int(np.sum(sample - sample.mean() > abs(observed)))
    return (count + 1) / (n_samples + 1), observed


@pytest.mark.parametrize("shift, seeds", [(0.05, 1), (0.02, 3), (0.0, 2)])
def test_ratio_bootstrap_equals_a_loop_over_resamples(shift, seeds):
    from study.stats.significance import paired_bootstrap_ratio

    rng = np.random.default_rng(7)
    tokens = rng.integers(1, 30, size=80).astype(float)
    systems, baselines = [], []
    for _ in range(seeds):
        base = tokens * rng.uniform(1.5, 2.5, size=80)
        systems.append(np.stack([base * (1 - shift) + rng.normal(0, 1, 80), tokens], 1))
        baselines.append(np.stack([base, tokens], 1))
    got = paired_bootstrap_ratio(systems, baselines, n_samples=400, seed=3)
    p, observed = _ratio_reference(systems, baselines, 400, 3)
    assert got.difference == pytest.approx(observed, rel=1e-9)
    assert got.p_value == pytest.approx(p, abs=2 / 401)  # float32 sums may flip a tie
    assert paired_bootstrap_ratio(baselines, baselines, n_samples=400).p_value == 1.0
    with pytest.raises(ValueError, match=r"\[n, 2\]"):
        paired_bootstrap_ratio([np.ones((3, 3))], [np.ones((3, 3))])


def _nll_like(rng, units: int, seeds: int) -> tuple[list, list]:
    """[units, 2] (nats, tokens) per seed: non-integer sums, as the NLL tables resample them."""
    tokens = rng.integers(1, 60, size=units).astype(float)
    systems = [np.stack([tokens * rng.uniform(0.5, 4.0, units), tokens], 1) for _ in range(seeds)]
    baselines = [np.stack([tokens * rng.uniform(0.5, 4.0, units), tokens], 1) for _ in range(seeds)]
    return systems, baselines


def test_non_integer_resample_sums_are_exact_whatever_the_order_of_summation():
    """The NLL tables' bootstrap must give the same bits on every CPU: a BLAS kernel (AVX2 or AVX-512)
    picks its own order of summation, so every resample's sum has to be exact, which `on_exact_grid`
    makes it (each value moved by at most 2^-30 relative to the largest sum)."""
    from study.stats.significance import on_exact_grid, resample_counts, resampled_sums

    systems, baselines = _nll_like(np.random.default_rng(11), 700, 3)
    raw = [*systems, *baselines]
    grid = on_exact_grid(raw)
    assert max(float(np.abs(g - a).max()) for g, a in zip(grid, raw)) <= 2.0**-20
    counts = resample_counts(700, 300, 5)
    sums = resampled_sums(counts, grid, np.float64)
    backwards = resampled_sums(counts[:, ::-1], [g[::-1] for g in grid], np.float64)
    assert np.array_equal(sums, backwards)
    flat = np.concatenate(grid, axis=1)
    for row in (0, 150, 299):  # each against the correctly rounded sum of the exact products
        exact = [math.fsum(c * x for c, x in zip(counts[row], flat[:, j])) for j in range(flat.shape[1])]
        assert sums[row].tolist() == exact


def test_the_ratio_bootstrap_does_not_depend_on_the_order_it_sums_in(monkeypatch):
    """The whole test (its p, variance, differences) is the same when each resample is summed backwards."""
    from study.stats import significance

    systems, baselines = _nll_like(np.random.default_rng(12), 400, 2)
    forwards = significance.paired_bootstrap_ratio(systems, baselines, n_samples=500, seed=4)
    summed = significance.resampled_sums
    monkeypatch.setattr(
        significance, "resampled_sums", lambda c, stats, dtype: summed(c[:, ::-1], [a[::-1] for a in stats], dtype)
    )
    assert significance.paired_bootstrap_ratio(systems, baselines, n_samples=500, seed=4) == forwards
