"""Read the learning curves of a peer library's runs, so ``alf.bin.compare`` can set alf
runs beside them. Stable-Baselines3 (2.x) writes, in the directory of a run:

- ``*monitor.csv`` (``stable_baselines3.common.monitor.Monitor``, one file per env of a
  ``make_vec_env(..., monitor_dir=DIR)``): a first line ``#{"t_start": ..., "env_id": ...}``
  (JSON), then the columns ``r,l,t``: each finished episode's return, length and the
  seconds since that file's ``t_start``;
- ``progress.csv`` (its logger with the ``"csv"`` format, ``configure(DIR, ["csv"])``):
  one row per dump, keys as columns: ``time/total_timesteps``, ``time/time_elapsed``
  (whole seconds), ``rollout/ep_rew_mean`` (the mean return of the last
  ``stats_window_size`` episodes, 100 by default), ``eval/mean_reward`` (rows written by
  ``EvalCallback``); a key a row did not log is empty;
- ``evaluations.npz`` (``EvalCallback(log_path=DIR)``): ``timesteps [N]``,
  ``results [N, episodes]``, ``ep_lengths [N, episodes]``.

The metrics, as alf's (:mod:`alf.studies.run_data`):

- ``train_return``: from the monitor files when there are any: the episodes of every env
  in the order they ended, against the env steps of the episodes finished so far (the sum
  of their lengths, as SB3's own ``ts2xy``), each point the mean return of the last
  :data:`EPISODE_WINDOW` episodes (alf's training return averages 20); else
  ``rollout/ep_rew_mean`` of ``progress.csv``;
- ``eval_return``: the mean return of each evaluation in ``evaluations.npz``, else
  ``eval/mean_reward`` of ``progress.csv``.

Wall-clock seconds a file does not hold are interpolated (linearly in env steps) from the
rows of ``progress.csv`` that have ``time/time_elapsed``, else from the monitor files;
NaN when neither exists.
"""
import glob
import json
import os
from typing import List, Optional, Tuple

import numpy as np

from alf.studies.run_data import Curve, METRICS, read_rows
from alf.trainers.progress_log import EVAL_FILE, HEADER, PROGRESS_FILE
from alf.trainers.trainer import CONFIG_FILE

ALF, SB3 = "alf", "sb3"
EPISODE_WINDOW = 20
MONITOR_PATTERN = "*monitor.csv"
EVALUATIONS_FILE = "evaluations.npz"
SB3_STEPS = "time/total_timesteps"
SB3_SECONDS = "time/time_elapsed"
SB3_TRAIN_RETURN = "rollout/ep_rew_mean"
SB3_EVAL_RETURN = "eval/mean_reward"


def log_format(run_dir: str) -> Optional[str]:
    """``"alf"`` (an alf run: ``eval.csv``, ``config.gin`` or ``progress.csv`` with alf's
    columns), ``"sb3"`` (monitor files, ``evaluations.npz`` or SB3's ``progress.csv``), or
    None."""
    header = _header(os.path.join(run_dir, PROGRESS_FILE))
    if header[:2] == HEADER[:2] or any(os.path.isfile(os.path.join(run_dir, f))
                                       for f in (EVAL_FILE, CONFIG_FILE)):
        return ALF
    if (SB3_STEPS in header or _monitor_files(run_dir)
            or os.path.isfile(os.path.join(run_dir, EVALUATIONS_FILE))):
        return SB3
    return None


def read_sb3_curve(run_dir: str, metric: str = "eval_return",
                   window: int = EPISODE_WINDOW) -> Curve:
    """The ``metric`` curve of the SB3 run in ``run_dir`` (module docstring; empty when
    the run has logged no such point).

    Args:
        window: episodes averaged per point of a monitor-file ``train_return``.

    Raises:
        ValueError: ``metric`` is not one of :data:`alf.studies.run_data.METRICS`.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}: choose one of {', '.join(METRICS)}")
    rows = read_rows(os.path.join(run_dir, PROGRESS_FILE))
    if metric == "train_return" and _monitor_files(run_dir):
        return monitor_curve(run_dir, window)
    if metric == "eval_return" and os.path.isfile(os.path.join(run_dir, EVALUATIONS_FILE)):
        with np.load(os.path.join(run_dir, EVALUATIONS_FILE)) as data:
            steps = np.asarray(data["timesteps"], dtype=np.int64).reshape(-1)
            values = np.asarray(data["results"], dtype=np.float64).reshape(len(steps), -1)
        return Curve(steps, _seconds_at(run_dir, rows, steps), values.mean(axis=1))
    column = SB3_TRAIN_RETURN if metric == "train_return" else SB3_EVAL_RETURN
    steps, values = _columns(rows, SB3_STEPS, column)
    return Curve(steps.astype(np.int64), _seconds_at(run_dir, rows, steps), values)


def monitor_curve(run_dir: str, window: int = EPISODE_WINDOW) -> Curve:
    """Training return from the ``*monitor.csv`` files of ``run_dir``: one point per
    finished episode (module docstring). ``wall_time_s`` counts from the earliest
    ``t_start`` of the files."""
    lengths, returns, seconds = read_monitor(run_dir)
    if len(returns) == 0:
        return Curve(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    sums = np.cumsum(np.concatenate([[0.0], returns]))
    ends = np.arange(1, len(returns) + 1)
    starts = np.maximum(ends - window, 0)
    rolling = (sums[ends] - sums[starts]) / (ends - starts)
    return Curve(np.cumsum(lengths).astype(np.int64), seconds, rolling)


def read_monitor(run_dir: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The finished episodes of every ``*monitor.csv`` in ``run_dir``, in the order they
    ended: ``(lengths [E], returns [E], seconds [E])``, seconds since the earliest
    ``t_start``. A last line cut short by a kill mid-write is left out."""
    episodes: List[Tuple[float, float, float]] = []  # (absolute time, length, return)
    starts = []
    for path in _monitor_files(run_dir):
        with open(path) as f:
            first = f.readline()
        try:
            t_start = float(json.loads(first[1:])["t_start"]) if first.startswith("#") else 0.0
        except (ValueError, KeyError, TypeError):
            t_start = 0.0
        starts.append(t_start)
        for row in _monitor_rows(path):
            episodes.append((t_start + row[2], row[1], row[0]))
    episodes.sort()
    table = np.asarray(episodes, dtype=np.float64).reshape(-1, 3)
    origin = min(starts) if starts else 0.0
    return table[:, 1], table[:, 2], table[:, 0] - origin


# ----------------------------------------------------------------------------- helpers
def _monitor_files(run_dir: str) -> List[str]:
    return sorted(glob.glob(os.path.join(glob.escape(run_dir), MONITOR_PATTERN)))


def _monitor_rows(path: str) -> List[Tuple[float, float, float]]:
    """``(r, l, t)`` of each complete row of a monitor file (after its ``#`` line)."""
    rows = []
    with open(path, newline="") as f:
        lines = [line for line in f.read().splitlines() if not line.startswith("#")]
    header = lines[0].split(",") if lines else []
    if not {"r", "l", "t"} <= set(header):
        return rows
    cols = [header.index(c) for c in ("r", "l", "t")]
    for line in lines[1:]:
        fields = line.split(",")
        if len(fields) != len(header):
            continue
        try:
            rows.append(tuple(float(fields[c]) for c in cols))
        except ValueError:
            continue
    return rows


def _header(path: str) -> List[str]:
    try:
        with open(path) as f:
            return f.readline().strip().split(",")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return []


def _columns(rows, x_column: str, y_column: str) -> Tuple[np.ndarray, np.ndarray]:
    """``(x [N], y [N])`` of the rows where both columns hold a number."""
    pairs = []
    for row in rows:
        try:
            pairs.append((float(row[x_column]), float(row[y_column])))
        except (KeyError, TypeError, ValueError):
            continue
    table = np.asarray(pairs, dtype=np.float64).reshape(-1, 2)
    keep = ~np.isnan(table).any(axis=1)
    return table[keep, 0], table[keep, 1]


def _seconds_at(run_dir: str, rows, steps: np.ndarray) -> np.ndarray:
    """Wall-clock seconds at ``steps`` (``[N]``), interpolated from the run's clock
    (module docstring); NaN without one."""
    clock_steps, clock_seconds = _columns(rows, SB3_STEPS, SB3_SECONDS)
    if len(clock_steps) == 0 and _monitor_files(run_dir):
        lengths, _, seconds = read_monitor(run_dir)
        clock_steps, clock_seconds = np.cumsum(lengths), seconds
    if len(clock_steps) == 0:
        return np.full(len(steps), np.nan)
    order = np.argsort(clock_steps, kind="stable")
    return np.interp(np.asarray(steps, dtype=np.float64), clock_steps[order],
                     clock_seconds[order])
