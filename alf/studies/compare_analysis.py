"""Compare groups of runs: each group's scores aggregated over its runs with bootstrap
confidence intervals, curve bands, performance profiles and the probability that one
group's run beats another's (what ``alf.bin.compare`` reports).

The statistics are :mod:`alf.studies.stats` (Agarwal et al. 2021; rliable); the grid and
the per-run scores :mod:`alf.studies.compare_curves`. Every interval of one call uses the
same ``seed`` (each bootstrap starts its own generator from it), so a report is
reproducible exactly.
"""
import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from alf.errors import UserError
from alf.studies import stats
from alf.studies.compare_curves import X_LABELS, RunScores, common_grid, score_runs, x_of
from alf.studies.compare_runs import RunGroup

SCORES = ("final", "auc")
PROFILE_POINTS = 101
# a run's own points on the grid below which its AUC, curve band and time to the target
# are mostly interpolation (docs/compare.md, "How many points a curve needs")
MIN_CURVE_POINTS = 5


@dataclass
class Settings:
    """What to compare and how (the flags of ``alf.bin.compare``).

    Attributes:
        metric: ``eval_return`` or ``train_return``.
        x: ``env_steps`` or ``wall_time``.
        aggregate: ``iqm``, ``mean`` or ``median`` (the table's and the bands').
        target: the metric value whose first reach is timed (None: not reported).
        max_x: the grid ends here at the latest (None: at the shortest run's end).
        points: grid points.
        final_points: points averaged into a run's final score.
        reps: bootstrap resamples per interval.
        confidence: the intervals' coverage.
        seed: seed of every bootstrap.
    """
    metric: str = "eval_return"
    x: str = "env_steps"
    aggregate: str = "iqm"
    target: Optional[float] = None
    max_x: Optional[float] = None
    points: int = 100
    final_points: int = 1
    reps: int = stats.DEFAULT_REPS
    confidence: float = stats.DEFAULT_CONFIDENCE
    seed: int = 0


@dataclass
class GroupResult:
    """One group's results.

    Attributes:
        group: its runs.
        scores: per-run scores and curves on the grid.
        band: ``settings.aggregate`` of the curves per grid point with its interval.
        intervals: score (``final``, ``auc``, ``to_target``) -> aggregate name -> interval
            (every aggregate, for the interval plot; ``to_target`` only with a target).
        profile: the performance profile of the final scores at ``Comparison.taus``.
    """
    group: RunGroup
    scores: RunScores
    band: stats.Band
    intervals: Dict[str, Dict[str, stats.Interval]]
    profile: stats.Band


@dataclass
class Comparison:
    """Everything ``alf.bin.compare`` reports.

    Attributes:
        settings: how it was computed.
        grid: ``[G]`` the common x grid.
        groups: per group, in the order given.
        taus: ``[M]`` thresholds of the performance profiles (final scores).
        improvements: ``(A, B, P(A > B) on final scores)`` for each pair of groups.
    """
    settings: Settings
    grid: np.ndarray
    groups: List[GroupResult]
    taus: np.ndarray
    improvements: List[Tuple[str, str, stats.Interval]] = field(default_factory=list)


def compare(groups: List[RunGroup], settings: Settings) -> Comparison:
    """Score, aggregate and compare ``groups`` (each with at least one run).

    Raises:
        UserError: the runs share no x range (or ``max_x`` is before it), or a run has no
            wall-clock times and ``settings.x`` is ``wall_time``.
    """
    xs = [_checked_x(g.name, run, c, settings.x) for g in groups
          for run, c in zip(g.run_dirs, g.curves)]
    try:
        grid = common_grid(xs, settings.points, settings.max_x)
    except ValueError as e:
        raise UserError(f"cannot put the runs on one {settings.x} grid: {e} (see which run "
                        "is short with --metric train_return, or leave it out)") from None
    scored = [score_runs(g.curves, settings.x, grid, settings.final_points, settings.target)
              for g in groups]
    finals = np.concatenate([s.final for s in scored])
    margin = 0.05 * (finals.max() - finals.min()) or 1.0  # profiles start at 1, end at 0
    taus = np.linspace(finals.min() - margin, finals.max() + margin, PROFILE_POINTS)
    results = [_group_result(g, s, taus, settings) for g, s in zip(groups, scored)]
    improvements = [
        (a.group.name, b.group.name, stats.probability_of_improvement_interval(
            a.scores.final, b.scores.final, settings.reps, settings.confidence, settings.seed))
        for a, b in itertools.combinations(results, 2)]
    return Comparison(settings, grid, results, taus, improvements)


def _group_result(group: RunGroup, scores: RunScores, taus: np.ndarray,
                  settings: Settings) -> GroupResult:
    boot = dict(reps=settings.reps, confidence=settings.confidence, seed=settings.seed)
    per_score = {"final": scores.final, "auc": scores.auc}
    if scores.to_target is not None:
        per_score["to_target"] = scores.to_target
    intervals = {name: {agg: stats.bootstrap_interval(values, agg, **boot)
                        for agg in stats.AGGREGATES}
                 for name, values in per_score.items()}
    band = stats.bootstrap_band(scores.curves, settings.aggregate, **boot)
    profile = stats.performance_profile_band(scores.final, taus, **boot)
    return GroupResult(group, scores, band, intervals, profile)


def short_curves_warning(comparison: Comparison) -> Optional[str]:
    """One line when runs have too few points of their own for the statistics asked for,
    else None: fewer than :data:`MIN_CURVE_POINTS` on the grid (AUC, curve bands, time to
    the target), or fewer than ``final_points`` up to its end (the final score). The
    bootstrap intervals are over runs: they cannot show that a run's curve is coarse."""
    s, grid = comparison.settings, comparison.grid
    within, upto = [], []
    for g in comparison.groups:
        for run_dir, curve in zip(g.group.run_dirs, g.group.curves):
            x = x_of(curve, s.x)
            within.append((int(np.sum((x >= grid[0]) & (x <= grid[-1]))), run_dir))
            upto.append((int(np.sum(x <= grid[-1])), run_dir))
    parts = []
    coarse = [c for c in within if c[0] < MIN_CURVE_POINTS]
    if coarse:
        what = "AUC, curve bands" + (" and time to the target" if s.target is not None else "")
        n, run_dir = min(coarse)
        parts.append(f"{len(coarse)} of {len(within)} runs have fewer than {MIN_CURVE_POINTS} "
                     f"{s.metric} points on the grid ({grid[0]:,.0f} .. {grid[-1]:,.0f} "
                     f"{X_LABELS[s.x]}; fewest: {run_dir}, {n}): their {what} are mostly "
                     "linear interpolation between those points")
    few = [c for c in upto if c[0] < s.final_points]
    if few:
        n, run_dir = min(few)
        parts.append(f"{len(few)} run(s) have fewer than --final_points {s.final_points} "
                     f"points up to the grid's end (fewest: {run_dir}, {n}): their final "
                     "score averages only those")
    if not parts:
        return None
    return ("; ".join(parts) + "; the confidence intervals (over runs) do not show this: "
            "evaluate more often (TrainerConfig.eval_interval), or read these numbers as rough")


def _checked_x(name: str, run_dir: str, curve, x: str) -> np.ndarray:
    values = x_of(curve, x)
    if np.isnan(values).any():
        raise UserError(f"{run_dir} (group {name}) has no wall-clock times (SB3 logs "
                        "without time/time_elapsed in progress.csv or monitor files): "
                        "compare it with --x env_steps")
    return values
