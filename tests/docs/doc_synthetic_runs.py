"""Run directories for the docs' ``alf.bin.compare`` commands.

A doc's compare command names groups of runs by glob (``--group 'ppo=runs/ppo_seed*'``)
that, in the docs, come from hours of training. The runner cannot train them, so before
such a command runs, every group glob that matches nothing in the doc's working
directory gets three synthetic alf runs (the ``*`` replaced by 0, 1, 2), each an
``eval.csv`` and a ``progress.csv`` with a rising learning curve that crosses 475 (the
CartPole target the docs use) and seed-to-seed noise: the command then runs for real on
alf's own file format.
"""
import glob
import os
from typing import List

import numpy as np

from alf.trainers.progress_log import EVAL_FILE, EVAL_HEADER, HEADER, PROGRESS_FILE

SEEDS = 3
POINTS = 10
STEPS_PER_POINT = 5000


def group_globs(argv: List[str]) -> List[str]:
    """The GLOB of every ``--group NAME=GLOB`` / ``--group=NAME=GLOB`` in ``argv``."""
    specs = [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "--group"]
    specs += [w.split("=", 1)[1] for w in argv if w.startswith("--group=")]
    return [s.split("=", 1)[1] for s in specs if "=" in s]


def make_runs(workdir: str, argv: List[str]) -> List[str]:
    """Write synthetic runs for the group globs of ``argv`` that match nothing in
    ``workdir``; returns the run directories written."""
    written = []
    for g, pattern in enumerate(group_globs(argv)):
        if "*" not in pattern or glob.glob(os.path.join(workdir, pattern)):
            continue
        for seed in range(SEEDS):
            run_dir = os.path.join(workdir, pattern.replace("*", str(seed), 1))
            _write_run(run_dir, speed=1.0 + 0.3 * g, seed=seed)
            written.append(run_dir)
    return written


def _write_run(run_dir: str, speed: float, seed: int) -> None:
    os.makedirs(run_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1, POINTS + 1):
        steps = i * STEPS_PER_POINT
        ret = 500.0 * (1.0 - np.exp(-speed * i / 3.0)) + rng.normal(0.0, 10.0)
        rows.append([i, steps, f"{i * 2.0:.3f}", f"{ret:.3f}", "10.000", "400.000",
                     "500.000", f"{ret:.1f}", 5])
    with open(os.path.join(run_dir, EVAL_FILE), "w") as f:
        f.write("\n".join(",".join(map(str, r)) for r in [EVAL_HEADER] + rows) + "\n")
    with open(os.path.join(run_dir, PROGRESS_FILE), "w") as f:
        f.write(",".join(HEADER) + "\n")
