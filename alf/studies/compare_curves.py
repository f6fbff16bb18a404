"""Runs' learning curves on a common x grid, and the per-run scores a comparison reports.

Runs evaluate at different env steps (or seconds), so their curves are put on one grid
before they are aggregated point by point: ``points`` evenly spaced x values from the
latest first point of any run to the earliest last point (or a smaller ``max_x``), so
that every run has measured values on both sides of every grid point and nothing is
extrapolated. Between two of its points a run's curve is interpolated **linearly** (the
line a plot draws between them; the trapezoids of the sweep's ``auc`` objective).

Per run, with ``end`` the grid's last x:

- ``final``: the mean of the run's last ``final_points`` points at or before ``end``;
- ``auc``: the area under the interpolated curve over the grid divided by its span
  (trapezoids over the grid): the curve's mean height, in the metric's units;
- ``to_target``: the x of the first point at or before ``end`` whose value reaches
  ``target``; ``inf`` for a run that never does (robust aggregates stay finite while
  fewer than a quarter (IQM) or a half (median) of the runs miss it).
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from alf.studies.run_data import Curve

X_AXES = ("env_steps", "wall_time")
X_LABELS = {"env_steps": "env steps", "wall_time": "wall-clock seconds"}
DEFAULT_POINTS = 100


def x_of(curve: Curve, x: str) -> np.ndarray:
    """``[T]`` float64: the curve's x values on axis ``x`` (:data:`X_AXES`)."""
    if x == "env_steps":
        return curve.env_steps.astype(np.float64)
    if x == "wall_time":
        return curve.wall_time_s.astype(np.float64)
    raise ValueError(f"unknown x axis {x!r}: choose one of {', '.join(X_AXES)}")


def common_grid(xs: Sequence[np.ndarray], points: int = DEFAULT_POINTS,
                max_x: Optional[float] = None) -> np.ndarray:
    """``[G]``: ``points`` evenly spaced values over the x range every run covers
    (module docstring), cut at ``max_x``; one point when that range is a single x.

    Args:
        xs: each run's x values (``[T_i]``, non-empty).

    Raises:
        ValueError: the runs' ranges do not overlap, or ``max_x`` is before them.
    """
    start = max(float(np.min(x)) for x in xs)
    end = min(float(np.max(x)) for x in xs)
    if max_x is not None:
        end = min(end, float(max_x))
    if end < start:
        raise ValueError(f"the runs share no x range: the latest first point is at "
                         f"{start:g}, the grid would end at {end:g}")
    if end == start:
        return np.asarray([start])
    return np.linspace(start, end, max(2, points))


def on_grid(x: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``[G]``: the run's curve (``x`` ``[T]``, ``values`` ``[T]``) linearly interpolated
    at ``grid`` (``[G]``, inside the run's x range)."""
    return np.interp(grid, x, values)


@dataclass
class RunScores:
    """The scores of one group's runs (module docstring), one entry per run.

    Attributes:
        curves: ``[R, G]`` each run's curve on the grid.
        final: ``[R]``.
        auc: ``[R]``.
        to_target: ``[R]`` x at which the target was first reached (``inf``: never);
            None without a target.
    """
    curves: np.ndarray
    final: np.ndarray
    auc: np.ndarray
    to_target: Optional[np.ndarray]

    @property
    def reached(self) -> int:
        """Runs that reached the target (0 without one)."""
        return 0 if self.to_target is None else int(np.isfinite(self.to_target).sum())


def score_runs(curves: List[Curve], x: str, grid: np.ndarray, final_points: int = 1,
               target: Optional[float] = None) -> RunScores:
    """:class:`RunScores` of ``curves`` (non-empty) on ``grid`` (from :func:`common_grid`)."""
    end = grid[-1]
    on, final, auc, to_target = [], [], [], []
    for curve in curves:
        order = np.argsort(x_of(curve, x), kind="stable")  # np.interp needs increasing x
        cx, cv = x_of(curve, x)[order], curve.values[order]
        values = on_grid(cx, cv, grid)
        on.append(values)
        seen = cx <= end
        final.append(float(np.mean(cv[seen][-final_points:])))
        auc.append(area_per_span(grid, values))
        if target is not None:
            hits = np.flatnonzero(seen & (cv >= target))
            to_target.append(float(cx[hits[0]]) if len(hits) else np.inf)
    return RunScores(np.asarray(on), np.asarray(final), np.asarray(auc),
                     None if target is None else np.asarray(to_target))


def area_per_span(grid: np.ndarray, values: np.ndarray) -> float:
    """Trapezoid area of ``values`` over ``grid`` (both ``[G]``) divided by the grid's
    span; the value itself for a one-point grid."""
    if len(grid) == 1:
        return float(values[0])
    area = float(np.sum((values[1:] + values[:-1]) * np.diff(grid)) / 2.0)
    return area / float(grid[-1] - grid[0])
