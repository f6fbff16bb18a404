"""The rows of the results page: ``docs/results.csv`` read and written, and each row's
figures computed from the curves its seeds left.

One row per (algorithm, env, budget). Some columns are written by hand (what the row is,
the peer's published figure and its source, the command that reproduces it); the others
are computed by :func:`measure` from the seeds' curves, which ``bench/results_page.py
--collect`` copies from the run directories into ``docs/results_data/<key>/seed_<s>/``
(``progress.csv``, ``eval.csv`` and the first start's ``machine.json``), so the page can
be regenerated, and checked, from the repository alone.

Scores (both are over the seeds that reached the row's budget; a seed still running is
listed with the env steps it has reached, never averaged in):

- ``alf_iqm`` [``alf_ci_low``, ``alf_ci_high``]: the score under the peer's protocol
  (``alf_metric``). ``train_return`` is CleanRL's: the return of the training episodes
  of the stochastic policy; a seed's final score is the mean of ``progress.csv``'s
  ``average_return`` (itself the mean of the last ``metric_buffer_size`` episodes) over
  the rows in the last 5% of the budget. ``eval_return``: the greedy policy's mean
  evaluation return (``eval.csv``), averaged over the evaluations in the last 5%.
- ``alf_eval_*``: the greedy evaluation score as above (rl-baselines3-zoo reports a
  deterministic evaluation), where the runs evaluate.

Each aggregate is the interquartile mean over seeds with its 95% percentile bootstrap
interval (``alf.studies.stats``: Agarwal et al. 2021).
"""
import csv
import glob
import json
import os
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from alf.studies.run_data import Curve, read_curve
from alf.studies.stats import bootstrap_interval

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
CSV_PATH = os.path.join(REPO_ROOT, "docs", "results.csv")
DATA_DIR = os.path.join(REPO_ROOT, "docs", "results_data")
MACHINE_FILE = "machine.json"

#: written by hand: what the row is and what it is compared with
SPEC_COLUMNS = ["key", "family", "algorithm", "env", "env_steps", "seeds", "alf_metric",
                "peer", "peer_mean", "peer_std", "peer_source", "zoo_mean", "zoo_std",
                "zoo_source", "command", "runs", "notes"]
#: computed by :func:`measure` from the seeds' curves
MEASURED_COLUMNS = ["seeds_done", "alf_iqm", "alf_ci_low", "alf_ci_high", "alf_per_seed",
                    "alf_eval_iqm", "alf_eval_ci_low", "alf_eval_ci_high", "running",
                    "minutes_per_run", "machine"]
COLUMNS = SPEC_COLUMNS + MEASURED_COLUMNS
#: the share of the budget whose points make a seed's final score
FINAL_WINDOW = 0.05
FAMILIES = ("MuJoCo on-policy", "MuJoCo off-policy", "Atari")


@dataclass
class Seed:
    """One seed's curves, as kept in ``docs/results_data/<key>/seed_<s>/``.

    Attributes:
        seed: the seed.
        train: training return against env steps (``progress.csv``).
        evaluation: greedy evaluation return against env steps (``eval.csv``).
        machine: the run's host facts (``cpu_model``, ``usable_cpus``), or ``{}``.
    """
    seed: int
    train: Curve
    evaluation: Curve
    machine: Dict[str, object]

    @property
    def env_steps(self) -> int:
        """The env steps the seed has reached (its last recorded row)."""
        ends = [int(c.env_steps[-1]) for c in (self.train, self.evaluation) if len(c)]
        return max(ends, default=0)

    @property
    def minutes(self) -> float:
        """Training minutes so far (the Trainer's clock, summed over resumes)."""
        ends = [float(c.wall_time_s[-1]) for c in (self.train, self.evaluation) if len(c)]
        return max(ends, default=0.0) / 60.0


def read_rows(path: str = CSV_PATH) -> List[Dict[str, str]]:
    """The rows of ``docs/results.csv`` as dicts of strings, in file order.

    Raises:
        ValueError: a column is missing or unknown (names them).
    """
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        rows = list(reader)
    missing = [c for c in COLUMNS if c not in header]
    extra = [c for c in header if c not in COLUMNS]
    if missing or extra:
        raise ValueError(f"{path}: columns missing {missing}, unknown {extra}; the "
                         f"columns are {', '.join(COLUMNS)}")
    return rows


def write_rows(rows: Sequence[Dict[str, str]], path: str = CSV_PATH) -> None:
    """Write ``rows`` with the columns in :data:`COLUMNS` order."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMNS})


def seed_dirs(key: str, data_dir: str = DATA_DIR) -> List[str]:
    """The kept seed directories of row ``key`` (``seed_<s>``), by seed."""
    dirs = glob.glob(os.path.join(data_dir, key, "seed_*"))
    return sorted(dirs, key=lambda d: int(os.path.basename(d).split("_", 1)[1]))


def read_seed(seed_dir: str) -> Seed:
    """One kept seed directory."""
    machine: Dict[str, object] = {}
    path = os.path.join(seed_dir, MACHINE_FILE)
    if os.path.exists(path):
        with open(path) as f:
            machine = json.load(f)
    return Seed(int(os.path.basename(seed_dir).split("_", 1)[1]),
                read_curve(seed_dir, "train_return"), read_curve(seed_dir, "eval_return"),
                machine)


def final_score(curve: Curve, budget: int) -> Optional[float]:
    """The mean of ``curve`` over its points in the last :data:`FINAL_WINDOW` of
    ``budget`` env steps (None when it has none there: not finished, or no data)."""
    if not len(curve) or curve.env_steps[-1] < budget:
        return None
    window = curve.values[curve.env_steps >= budget * (1.0 - FINAL_WINDOW)]
    return float(np.mean(window)) if len(window) else None


def _fmt(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.1f}"


def _aggregate(scores: List[float]) -> List[str]:
    """IQM, CI low, CI high of ``scores`` as strings ('' for each when there are none)."""
    if not scores:
        return ["", "", ""]
    interval = bootstrap_interval(np.asarray(scores, dtype=np.float64), "iqm")
    return [_fmt(interval.point), _fmt(interval.low), _fmt(interval.high)]


def _machine(seeds: List[Seed]) -> str:
    """The CPUs the seeds ran on and the alf commits they ran (``+``: with local changes,
    kept as a patch in the run's ``run_info``)."""
    names = sorted({f"{s.machine.get('cpu_model', 'unknown CPU')} ({s.machine.get('cpu_count', '?')} "
                    f"CPUs, {s.machine.get('usable_cpus', '?')} per run)"
                    for s in seeds if s.machine})
    commits: List[str] = []
    for s in seeds:
        commits += [c for c in s.machine.get("commits", []) if c not in commits]
    return "; ".join(names) + (f"; alf {', '.join(commits)}" if commits else "")


def measure(row: Dict[str, str], data_dir: str = DATA_DIR) -> Dict[str, str]:
    """``row`` with its :data:`MEASURED_COLUMNS` computed from the kept seeds."""
    budget = int(row["env_steps"])
    seeds = [read_seed(d) for d in seed_dirs(row["key"], data_dir)]
    metric = row["alf_metric"]
    finals, eval_finals, done, running = [], [], [], []
    for s in seeds:
        score = final_score(s.train if metric == "train_return" else s.evaluation, budget)
        if score is None:
            running.append(f"seed {s.seed} at {s.env_steps:,}")
            continue
        done.append(s)
        finals.append((s.seed, score))
        evaluated = final_score(s.evaluation, budget)
        if evaluated is not None:
            eval_finals.append(evaluated)
    out = dict(row)
    out["seeds_done"] = str(len(done))
    out["alf_iqm"], out["alf_ci_low"], out["alf_ci_high"] = _aggregate([f for _, f in finals])
    out["alf_per_seed"] = "; ".join(f"{s}: {f:.1f}" for s, f in finals)
    (out["alf_eval_iqm"], out["alf_eval_ci_low"],
     out["alf_eval_ci_high"]) = _aggregate(eval_finals)
    out["running"] = "; ".join(running)
    out["minutes_per_run"] = (f"{statistics.median(s.minutes for s in done):.0f}"
                              if done else "")
    out["machine"] = _machine(seeds)
    return out
