"""Statistics across seeds: aggregates with bootstrap confidence intervals, performance
profiles and the probability of improvement.

Why: a handful of seeds per method is the norm in deep RL, and a mean over them with no
uncertainty says little about whether A beats B. Agarwal et al. (2021), "Deep
Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS,
arXiv:2108.13264), recommend robust aggregates (the interquartile mean), percentile
bootstrap confidence intervals over runs, performance profiles and the probability of
improvement; their library is rliable (github.com/google-research/rliable). This module
implements the same estimators in numpy/scipy, so alf does not need rliable (nor its
``arch`` dependency) at run time; ``tests/studies/test_stats.py`` checks the intervals
against rliable's on a fixed input.

Shapes: ``scores`` is ``[R]`` (R runs of one task) or ``[R, K]`` (R runs on each of K
tasks). A bootstrap resample draws R runs with replacement *within each task* (rliable's
stratified bootstrap), so every task keeps its weight. Each function that resamples
starts a fresh ``numpy.random.default_rng(seed)``: the same call gives the same interval
whatever was computed before it.

Differences from rliable worth knowing: :func:`median` is the median of all scores
(rliable's ``aggregate_median`` is the median of the per-task means, which for a single
task is the mean); everything else matches its definitions.
"""
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np
from scipy import stats as scipy_stats

DEFAULT_REPS = 2000
DEFAULT_CONFIDENCE = 0.95
# resampled values held in memory at once (float64: 32 MB); reps are drawn in chunks
_CHUNK_ELEMENTS = 4_000_000
# +inf (e.g. "never reached the target") stands in as this in percentile interpolation,
# where inf - inf would give nan; a quantile interpolated towards it (by any fraction
# above 1e-50) lands above _INF_AGAIN and is +inf again, as interpolating towards inf is
_INF_STAND_IN = 1e300
_INF_AGAIN = 1e250


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along ``axis``: the mean of the middle 50% of the values
    (``scipy.stats.trim_mean(x, 0.25)``: a quarter of the values cut from each end, as
    rliable's ``aggregate_iqm``). Robust to a few outlier runs, yet uses half the runs,
    so it is less noisy than the median."""
    return scipy_stats.trim_mean(x, 0.25, axis=axis)


def mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean along ``axis``."""
    return np.mean(x, axis=axis)


def median(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Median along ``axis``."""
    return np.median(x, axis=axis)


#: aggregate name -> function(values, axis) reducing that axis
AGGREGATES: Dict[str, Callable[..., np.ndarray]] = {"iqm": iqm, "mean": mean, "median": median}
AGGREGATE_LABELS = {"iqm": "IQM", "mean": "mean", "median": "median"}


@dataclass
class Interval:
    """A point estimate with its confidence interval.

    Attributes:
        point: the aggregate of the scores themselves.
        low, high: the interval's ends (``confidence`` percentile bootstrap).
    """
    point: float
    low: float
    high: float


@dataclass
class Band:
    """Point estimates with confidence intervals along a grid (a curve's band).

    Attributes:
        point, low, high: ``[G]`` each.
    """
    point: np.ndarray
    low: np.ndarray
    high: np.ndarray


def aggregate(scores: np.ndarray, name: str = "iqm") -> float:
    """The aggregate ``name`` (:data:`AGGREGATES`) of all of ``scores`` (``[R]`` or
    ``[R, K]``: every run of every task pooled)."""
    return float(_aggregate_fn(name)(np.asarray(scores, dtype=np.float64).reshape(-1)))


def bootstrap_interval(scores: np.ndarray, name: str = "iqm", reps: int = DEFAULT_REPS,
                       confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> Interval:
    """The aggregate ``name`` of ``scores`` (``[R]`` or ``[R, K]``) with its percentile
    bootstrap interval: the aggregate of ``reps`` stratified resamples of the runs, cut at
    its ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles."""
    runs = _as_runs_by_task(scores)[..., None]                        # [R, K, 1]
    point, low, high = _percentile_bootstrap(runs, _pooled(_aggregate_fn(name)), reps,
                                             confidence, seed)
    return Interval(float(point[0]), float(low[0]), float(high[0]))


def bootstrap_band(values: np.ndarray, name: str = "iqm", reps: int = DEFAULT_REPS,
                   confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> Band:
    """Per grid point, the aggregate ``name`` of ``values`` (``[R, G]``: R runs' curves on
    a common grid of G points) with its bootstrap interval. A resample draws whole runs
    (a run's curve stays together), the same draws for every grid point."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"values must be [runs, grid points], got shape {values.shape}")
    point, low, high = _percentile_bootstrap(values[:, None, :], _pooled(_aggregate_fn(name)),
                                             reps, confidence, seed)
    return Band(point, low, high)


def performance_profile(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """``[M]``: for each threshold of ``taus`` (``[M]``), the fraction of runs whose score
    is above it (> tau), averaged over tasks (rliable's score distribution). It shows the
    whole distribution of runs, not one summary: a profile above another everywhere
    dominates it stochastically."""
    runs = _as_runs_by_task(scores)
    return _profile(np.asarray(taus, dtype=np.float64))(runs[None])[0]


def performance_profile_band(scores: np.ndarray, taus: np.ndarray, reps: int = DEFAULT_REPS,
                             confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> Band:
    """:func:`performance_profile` (``[M]``) with a bootstrap interval at each tau."""
    point, low, high = _percentile_bootstrap(_as_runs_by_task(scores),
                                             _profile(np.asarray(taus, dtype=np.float64)),
                                             reps, confidence, seed)
    return Band(point, low, high)


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y): the probability that a random run of ``x`` (``[Rx]`` or ``[Rx, K]``)
    scores above a random run of ``y`` (``[Ry]`` or ``[Ry, K]``) on the same task, ties
    counting one half (the Mann-Whitney U statistic over Rx * Ry), averaged over tasks.
    Unlike a difference of aggregates it says how often A beats B, not by how much."""
    xs, ys = _as_runs_by_task(x), _as_runs_by_task(y)
    if xs.shape[1] != ys.shape[1]:
        raise ValueError(f"x and y must have the same tasks: shapes {xs.shape}, {ys.shape}")
    return float(_improvement(xs[None], ys[None])[0])


def probability_of_improvement_interval(x: np.ndarray, y: np.ndarray, reps: int = DEFAULT_REPS,
                                        confidence: float = DEFAULT_CONFIDENCE,
                                        seed: int = 0) -> Interval:
    """:func:`probability_of_improvement` with a percentile bootstrap interval; the runs
    of ``x`` and of ``y`` are resampled independently (each within its tasks)."""
    xs, ys = _as_runs_by_task(x), _as_runs_by_task(y)
    point = probability_of_improvement(xs, ys)
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ELEMENTS // (xs.shape[0] * ys.shape[0] * xs.shape[1]))
    dist = []
    for start in range(0, reps, chunk):
        n = min(chunk, reps - start)
        dist.append(_improvement(_resample(xs, n, rng), _resample(ys, n, rng)))
    low, high = _percentiles(np.concatenate(dist), confidence)
    return Interval(point, float(low), float(high))


# ----------------------------------------------------------------------------- helpers
def _aggregate_fn(name: str) -> Callable[..., np.ndarray]:
    if name not in AGGREGATES:
        raise ValueError(f"unknown aggregate {name!r}: choose one of {', '.join(AGGREGATES)}")
    return AGGREGATES[name]


def _as_runs_by_task(scores: np.ndarray) -> np.ndarray:
    """``[R]`` -> ``[R, 1]``; ``[R, K]`` as it is."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    if scores.ndim != 2 or scores.shape[0] == 0:
        raise ValueError(f"scores must be [runs] or [runs, tasks] with runs, got {scores.shape}")
    return scores


def _pooled(fn: Callable[..., np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A statistic of resamples ``[B, R, K, C]`` -> ``[B, C]``: ``fn`` over the R * K
    scores of each column."""
    def statistic(batch: np.ndarray) -> np.ndarray:
        b, r, k, c = batch.shape
        return fn(np.moveaxis(batch.reshape(b, r * k, c), 1, -1), axis=-1)
    return statistic


def _profile(taus: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A statistic of resamples ``[B, R, K]`` -> ``[B, M]``: fraction above each tau."""
    def statistic(batch: np.ndarray) -> np.ndarray:
        above = batch[..., None] > taus                               # [B, R, K, M]
        return above.mean(axis=1).mean(axis=1)
    return statistic


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x`` ``[B, Rx, K]``, ``y`` ``[B, Ry, K]`` -> ``[B]`` P(X > Y) + P(X = Y) / 2."""
    xv, yv = x[:, :, None, :], y[:, None, :, :]                       # [B, Rx, Ry, K]
    wins = (xv > yv).astype(np.float64) + 0.5 * (xv == yv)
    return wins.mean(axis=(1, 2)).mean(axis=-1)


def _resample(runs: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` stratified resamples of ``runs`` (``[R, K, ...]``) -> ``[n, R, K, ...]``: for
    each resample and task, R runs of that task drawn with replacement."""
    r, k = runs.shape[:2]
    picks = rng.integers(0, r, size=(n, r, k))
    return runs[picks, np.arange(k)]


def _percentile_bootstrap(runs: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray],
                          reps: int, confidence: float, seed: int
                          ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``statistic`` (resamples ``[B, R, K, ...]`` -> ``[B, ...]``) of ``runs`` and its
    percentile interval over ``reps`` resamples: ``(point, low, high)``, each ``[...]``."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ELEMENTS // runs.size)
    dist = [statistic(_resample(runs, min(chunk, reps - start), rng))
            for start in range(0, reps, chunk)]
    low, high = _percentiles(np.concatenate(dist), confidence)
    return statistic(runs[None])[0], low, high


def _percentiles(dist: np.ndarray, confidence: float) -> Tuple[np.ndarray, np.ndarray]:
    """The ``(1 -+ confidence) / 2`` quantiles of ``dist`` (``[B, ...]``) over its first
    axis (numpy's linear interpolation, as rliable); +inf values stay +inf."""
    tail = 100.0 * (1.0 - confidence) / 2.0
    finite = np.where(np.isposinf(dist), _INF_STAND_IN, dist)
    low, high = np.percentile(finite, [tail, 100.0 - tail], axis=0)
    return _restore_inf(low), _restore_inf(high)


def _restore_inf(x: np.ndarray) -> np.ndarray:
    return np.where(x >= _INF_AGAIN, np.inf, x)
