"""alf.studies.stats: aggregates on known inputs, bootstrap intervals against rliable's
numbers and against a plain reference bootstrap written here, performance profiles and
the probability of improvement."""
import numpy as np
import pytest
from scipy import stats as scipy_stats

from alf.studies import stats

# 10 runs of one task, and 5 runs on each of 2 tasks (the inputs of the rliable numbers)
X = np.array([12., 35., 48., 51., 60., 64., 70., 88., 93., 140.])
Y2 = np.array([[0.1, 1.2], [0.4, 0.9], [0.35, 1.6], [0.8, 1.1], [0.2, 0.7]])
Z = np.array([10., 30., 45., 50., 52., 61., 66., 75., 80., 99.])

# rliable 1.2.0's numbers (computed once with rliable.library.get_interval_estimates,
# method="percentile", reps=50,000, metrics.aggregate_iqm / aggregate_mean; the interval
# ends are the average over 10 independent rliable calls, with the spread (SD) of one
# call in the comment): (aggregate, scores, point, low, high, tolerance)
RLIABLE = [
    ("iqm", X, 63.5, 44.40, 86.50, 1.0),        # SD of one call: 0.12 (low), 0.19 (high)
    ("mean", X, 66.1, 46.42, 87.80, 0.8),       # SD 0.11, 0.14
    ("iqm", Y2, 0.708333, 0.533333, 0.916667, 1e-5),  # SD 0: the IQM of 10 values is coarse
    ("mean", Y2, 0.735, 0.57449, 0.91, 0.01),   # SD 0.0016, 0
]


def test_aggregates_on_known_inputs():
    x = np.array([1., 2., 3., 4., 5., 6., 7., 1000.])
    # IQM: a quarter (2 values) cut from each end: mean of 3, 4, 5, 6; the outlier 1000
    # moves the mean, not the IQM
    assert stats.aggregate(x, "iqm") == pytest.approx(4.5)
    assert stats.aggregate(x, "mean") == pytest.approx(128.5)
    assert stats.aggregate(x, "median") == pytest.approx(4.5)
    assert stats.aggregate(X, "iqm") == pytest.approx(np.mean(np.sort(X)[2:8]))
    # [runs, tasks]: every score pooled
    assert stats.aggregate(Y2, "median") == pytest.approx(0.75)
    np.testing.assert_allclose(stats.iqm(np.stack([x, 2 * x]), axis=-1), [4.5, 9.0])
    with pytest.raises(ValueError, match="iqm, mean, median"):
        stats.aggregate(x, "trimmed")


@pytest.mark.parametrize("name, scores, point, low, high, tol", RLIABLE)
def test_bootstrap_interval_agrees_with_rliable(name, scores, point, low, high, tol):
    """Tolerance: two bootstraps of 50,000 resamples each differ by Monte Carlo noise only;
    the SD of one call's interval end is at most 0.2 here (rliable's spread above, and
    alf's own over 10 seeds: 0.12 / 0.20 for the IQM of X), so the difference of two
    calls has an SD of at most ~0.25; the tolerances are 4 such SDs (Y2's IQM interval is
    exact: its bootstrap distribution is too coarse for the noise to move a quantile)."""
    interval = stats.bootstrap_interval(scores, name, reps=50_000, seed=0)
    assert interval.point == pytest.approx(point, abs=1e-4)
    assert interval.low == pytest.approx(low, abs=tol)
    assert interval.high == pytest.approx(high, abs=tol)


def _reference_bootstrap(scores, fn, reps, confidence, seed):
    """A plain loop: per resample, for each task draw R of its runs with replacement
    (the draws as stats does: one ``integers(0, R, (reps, R, K))`` call), pool them and
    apply ``fn``; then the percentile interval by sorting and interpolating by hand."""
    scores = scores.reshape(len(scores), -1)
    r, k = scores.shape
    picks = np.random.default_rng(seed).integers(0, r, size=(reps, r, k))
    dist = np.sort([fn(np.concatenate([scores[picks[b, :, t], t] for t in range(k)]))
                    for b in range(reps)])

    def quantile(q):  # numpy's default ("linear"): position q * (n - 1)
        pos = q * (reps - 1)
        lo = int(np.floor(pos))
        return dist[lo] + (dist[min(lo + 1, reps - 1)] - dist[lo]) * (pos - lo)
    return quantile((1 - confidence) / 2), quantile((1 + confidence) / 2)


def _interquartile_mean(v):
    """Sort, drop int(n / 4) values at each end, average the rest."""
    v, cut = np.sort(v), int(0.25 * len(v))
    return v[cut:len(v) - cut].mean()


@pytest.mark.parametrize("name, fn", [("iqm", _interquartile_mean), ("mean", np.mean),
                                      ("median", np.median)])
@pytest.mark.parametrize("scores", [X, Y2], ids=["one_task", "two_tasks"])
def test_bootstrap_interval_matches_a_reference_loop(name, fn, scores):
    interval = stats.bootstrap_interval(scores, name, reps=1000, confidence=0.9, seed=7)
    low, high = _reference_bootstrap(scores, fn, 1000, 0.9, seed=7)
    assert interval.low == pytest.approx(low, rel=1e-9)
    assert interval.high == pytest.approx(high, rel=1e-9)
    assert interval.point == pytest.approx(fn(scores.reshape(-1)))


def test_band_is_the_interval_of_each_grid_point():
    curves = np.stack([X, X * 2.0, X + 5.0], axis=1)   # [R=10, G=3]
    band = stats.bootstrap_band(curves, "iqm", reps=2000, seed=3)
    one = stats.bootstrap_interval(X, "iqm", reps=2000, seed=3)
    # column 0 is X with the same draws; the others are X transformed monotonically
    np.testing.assert_allclose([band.point[0], band.low[0], band.high[0]],
                               [one.point, one.low, one.high])
    np.testing.assert_allclose(band.low[1:], [2.0 * one.low, one.low + 5.0])
    np.testing.assert_allclose(band.high[1:], [2.0 * one.high, one.high + 5.0])


def test_an_infinite_score_keeps_the_interval_infinite_not_nan():
    # steps to a target: one run of four never got there
    interval = stats.bootstrap_interval(np.array([100., 200., 300., np.inf]), "median",
                                        reps=2000, seed=0)
    assert interval.point == 250.0 and interval.high == np.inf
    assert interval.low == 100.0
    assert stats.bootstrap_interval(np.array([1., 2., 3., 4., 5., 6., 7., np.inf]), "iqm",
                                    reps=2000).point == pytest.approx(4.5)


def test_performance_profile_on_a_known_input_and_its_rliable_band():
    taus = np.array([20., 50., 64., 100.])
    # runs above each tau (strictly): 9, 7, 4 (64 itself is not above 64), 1 of 10
    np.testing.assert_allclose(stats.performance_profile(X, taus), [0.9, 0.7, 0.4, 0.1])
    # two tasks: the fraction per task, averaged: tau 0.5 -> (1/5 + 5/5) / 2
    np.testing.assert_allclose(stats.performance_profile(Y2, [0.5]), [0.6])
    band = stats.performance_profile_band(X, [20., 50., 65., 100.], reps=50_000, seed=0)
    # rliable's create_performance_profile (reps 50,000): the same fractions of 10 runs,
    # identical over 5 calls (the quantiles sit on the 0.1 grid of possible fractions)
    np.testing.assert_allclose(band.low, [0.7, 0.4, 0.1, 0.0])
    np.testing.assert_allclose(band.high, [1.0, 1.0, 0.7, 0.3])


def test_probability_of_improvement():
    x, y = np.array([1., 2., 3.]), np.array([0., 2., 2.5])
    # 1 beats 0; 2 beats 0 and ties 2; 3 beats all three: (1 + 1.5 + 3) / 9
    assert stats.probability_of_improvement(x, y) == pytest.approx(5.5 / 9)
    u = scipy_stats.mannwhitneyu(X, Z).statistic
    assert stats.probability_of_improvement(X, Z) == pytest.approx(u / 100)
    assert stats.probability_of_improvement(Z, X) == pytest.approx(1 - u / 100)
    interval = stats.probability_of_improvement_interval(X, Z, reps=20_000, seed=0)
    # rliable's get_interval_estimates with metrics.probability_of_improvement (reps
    # 50,000; ends averaged over 10 calls): 0.56 [0.296, 0.810], SD of one call 0.005 and
    # 0 (its quantiles sit on the 0.01 grid of U / 100); alf's SD over seeds is 0.003, so
    # 0.02 is about 3.5 SDs of the difference, and one step of that grid
    assert interval.point == pytest.approx(0.56)
    assert interval.low == pytest.approx(0.296, abs=0.02)
    assert interval.high == pytest.approx(0.810, abs=0.02)
