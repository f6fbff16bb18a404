"""The groups of runs ``alf.bin.compare`` compares: ``NAME=GLOB`` -> run directories and
their learning curves, alf's or Stable-Baselines3's (:mod:`alf.studies.peer_logs`).

Every user mistake is one :class:`~alf.errors.UserError` naming the group, the glob or the
directory and what to do about it: a glob that matches no directory, a directory that is
neither an alf run nor SB3 logs, a run without a point of the metric yet.
"""
import glob
import os
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from alf.errors import ConfigError, UserError
from alf.studies.peer_logs import ALF, log_format, read_sb3_curve
from alf.studies.run_data import METRICS, Curve, read_curve

_SOURCES = {
    ("eval_return", ALF): "eval.csv (TrainerConfig.evaluate)",
    ("train_return", ALF): "average_return in progress.csv",
    ("eval_return", "sb3"): "evaluations.npz or eval/mean_reward in progress.csv (EvalCallback)",
    ("train_return", "sb3"): "*monitor.csv or rollout/ep_rew_mean in progress.csv",
}


@dataclass
class RunGroup:
    """One group of runs (e.g. the seeds of one method).

    Attributes:
        name: the group's name (``NAME`` of ``--group NAME=GLOB``).
        pattern: its glob.
        run_dirs: the run directories, sorted.
        formats: ``"alf"`` or ``"sb3"`` per run.
        curves: the metric's curve per run (each non-empty).
    """
    name: str
    pattern: str
    run_dirs: List[str]
    formats: List[str]
    curves: List[Curve]


def parse_group(spec: str) -> Tuple[str, str]:
    """``"NAME=GLOB"`` -> ``(NAME, GLOB)``.

    Raises:
        ConfigError: no ``=``, or an empty name or glob.
    """
    name, sep, pattern = spec.partition("=")
    name, pattern = name.strip(), pattern.strip()
    if not sep or not name or not pattern:
        raise ConfigError(f"--group {spec!r}: give NAME=GLOB, e.g. --group 'ppo=runs/ppo_seed*' "
                          "(the glob matches the run directories of the group)")
    return name, pattern


def load_groups(specs: Sequence[str], metric: str) -> List[RunGroup]:
    """The groups of ``--group`` ``specs`` with their ``metric`` curves.

    Raises:
        UserError: no group, a repeated name, or any problem of :func:`load_group`.
    """
    if metric not in METRICS:
        raise ConfigError(f"--metric {metric!r} is not a metric: choose one of "
                          f"{', '.join(METRICS)}")
    if not specs:
        raise ConfigError("no --group given: name each group of runs, e.g. "
                          "--group 'ppo=runs/ppo_seed*' --group 'sb3=runs/sb3_ppo_*'")
    parsed = [parse_group(s) for s in specs]
    names = [n for n, _ in parsed]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"--group name {repeated[0]!r} is given twice: give each group its "
                          "own name")
    return [load_group(name, pattern, metric) for name, pattern in parsed]


def load_group(name: str, pattern: str, metric: str) -> RunGroup:
    """The runs whose directories ``pattern`` matches (relative to the current directory,
    ``~`` expanded) with their ``metric`` curves."""
    matches = sorted(glob.glob(os.path.expanduser(pattern)))
    run_dirs = [m for m in matches if os.path.isdir(m)]
    if not run_dirs:
        what = f" (only {len(matches)} file(s))" if matches else ""
        raise UserError(f"--group {name}={pattern}: the glob matches no directory{what} in "
                        f"{os.getcwd()}; it must match the group's run directories, e.g. "
                        f"'runs/{name}_seed*'")
    formats, curves = [], []
    for run_dir in run_dirs:
        fmt = log_format(run_dir)
        if fmt is None:
            raise UserError(_not_a_run(name, run_dir))
        curve = read_curve(run_dir, metric) if fmt == ALF else read_sb3_curve(run_dir, metric)
        if len(curve) == 0:
            raise UserError(f"{run_dir} (group {name}) has no {metric} point yet (read from "
                            f"{_SOURCES[(metric, fmt)]}): wait for one, choose the other "
                            "--metric, or leave the run out of the glob")
        formats.append(fmt)
        curves.append(curve)
    return RunGroup(name, pattern, run_dirs, formats, curves)


def _not_a_run(name: str, run_dir: str) -> str:
    inner = sorted(d for d in glob.glob(os.path.join(glob.escape(run_dir), "*"))
                   if os.path.isdir(d) and log_format(d) is not None)
    hint = (f"; it holds runs ({os.path.basename(inner[0])}, ...): match them with "
            f"'{os.path.join(run_dir, '*')}'" if inner else
            ": leave it out of the glob")
    return (f"{run_dir} (group {name}) is neither an alf run (progress.csv, eval.csv) nor "
            f"Stable-Baselines3 logs (*monitor.csv, progress.csv, evaluations.npz){hint}")
