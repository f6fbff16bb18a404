"""Shared by the throughput benchmarks: run ``python -m alf.bin.train`` and read the
agent steps/s, the policy lag and the learner's share of time off the run it leaves.

Speed is measured from ``progress.csv`` (one row per summary interval, with the
Trainer's own wall clock since its loop started) between the end of a warm-up
iteration and the last row, so process start-up, worker spawn and first-call costs
are excluded.
"""
import csv
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_train(conf_args: Sequence[str], root_dir: str, params: Sequence[str]) -> str:
    """Run ``python -m alf.bin.train <conf_args> --root_dir root_dir --conf_param p ...``
    from the repository root; its stdout and stderr together. Exits (naming the
    command and the end of its output) when it fails."""
    cmd = [sys.executable, "-m", "alf.bin.train", *conf_args, "--root_dir", root_dir]
    for p in params:
        cmd += ["--conf_param", p]
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}")
    return proc.stdout


def progress_rows(root_dir: str) -> Dict[int, dict]:
    """The run's ``progress.csv`` rows by iteration."""
    with open(os.path.join(root_dir, "progress.csv")) as f:
        return {int(r["iteration"]): r for r in csv.DictReader(f)}


def agent_steps_per_s(rows: Dict[int, dict], first: int, last: int) -> float:
    """Env (agent) steps per second between the ends of iterations ``first`` and ``last``."""
    a, b = rows[first], rows[last]
    steps = int(b["env_steps"]) - int(a["env_steps"])
    return steps / (float(b["wall_time_s"]) - float(a["wall_time_s"]))


def last_async_lag(output: str) -> Optional[List[float]]:
    """``[min, avg, max]`` of the last async ``lag a/b/c`` progress note, or None."""
    lags = re.findall(r"\| lag (\d+)/([\d.]+)/(\d+)", output)
    return [int(lags[-1][0]), float(lags[-1][1]), int(lags[-1][2])] if lags else None


def learner_share(root_dir: str, rows: Dict[int, dict], first: int, last: int
                  ) -> Optional[float]:
    """The share of the time between iterations ``first`` and ``last`` that the learner
    spent training (not collecting or waiting for data), from the cumulative
    ``Time/train_fraction`` summaries (needs ``summary_interval`` dividing both
    iterations); None when they are missing. Close to 1: the learner binds."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        acc = EventAccumulator(root_dir, size_guidance={"scalars": 0})
        acc.Reload()
        fraction = {e.step: e.value for e in acc.Scalars("Time/train_fraction")}
    except Exception:  # noqa: BLE001 - optional detail of the report
        return None
    if first not in fraction or last not in fraction:
        return None
    t_first, t_last = float(rows[first]["wall_time_s"]), float(rows[last]["wall_time_s"])
    # the fraction is of the loop's time since it started, which is the csv's wall time
    return (fraction[last] * t_last - fraction[first] * t_first) / (t_last - t_first)
