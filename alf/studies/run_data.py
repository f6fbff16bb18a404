"""Read what an alf run wrote: its learning curves from ``progress.csv`` and ``eval.csv``.

Two metrics, both against env steps (and wall-clock seconds of training):

- ``eval_return``: the greedy policy's mean evaluation return (``eval.csv``, one row per
  ``TrainerConfig.eval_interval`` iterations);
- ``train_return``: the average return of the last training episodes (``progress.csv``,
  one row per summary interval).
"""
import csv
import math
import os
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from alf.trainers.progress_log import EVAL_FILE, PROGRESS_FILE

# metric name -> (file, column)
METRICS: Dict[str, tuple] = {
    "eval_return": (EVAL_FILE, "eval_return"),
    "train_return": (PROGRESS_FILE, "average_return"),
}


@dataclass
class Curve:
    """One run's metric over training (rows without a value, e.g. before the first
    episode ended, are left out).

    Attributes:
        env_steps: ``[T]`` int64, env steps at each point (increasing).
        wall_time_s: ``[T]`` float64, training seconds at each point.
        values: ``[T]`` float64, the metric.
    """
    env_steps: np.ndarray
    wall_time_s: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)


def read_curve(run_dir: str, metric: str = "eval_return") -> Curve:
    """The ``metric`` curve of the run in ``run_dir`` (empty when the file is missing or
    has no rows yet: a run that has just started).

    Raises:
        ValueError: ``metric`` is not one of :data:`METRICS`.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}: choose one of {', '.join(METRICS)}")
    file_name, column = METRICS[metric]
    rows = read_rows(os.path.join(run_dir, file_name))
    steps: List[int] = []
    times: List[float] = []
    values: List[float] = []
    for row in rows:
        value = _number(row.get(column))
        step = _number(row.get("env_steps"))
        if value is None or step is None:
            continue
        steps.append(int(step))
        times.append(_number(row.get("wall_time_s")) or 0.0)
        values.append(value)
    return Curve(np.asarray(steps, dtype=np.int64), np.asarray(times, dtype=np.float64),
                 np.asarray(values, dtype=np.float64))


def read_rows(path: str) -> List[Dict[str, str]]:
    """The rows of a csv file with a header (``[]`` when missing); a last row cut short by
    a kill mid-write (fewer fields than the header) is left out."""
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                return []
            return [dict(zip(header, r)) for r in reader if len(r) == len(header)]
    except FileNotFoundError:
        return []


def _number(text) -> "float | None":
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x
