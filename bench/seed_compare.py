"""Several seeds of several arms, trained and compared with ``alf.bin.compare`` (IQM,
95% bootstrap CIs, P(A > B); Agarwal et al. 2021): the runner behind
``bench/exploration_compare.py`` (an algorithm with and without an intrinsic reward) and
``bench/precision_learning.py`` (fp32 against bf16).

A task is a dict:

- ``arms``: label -> example config (``--conf``);
- ``env_steps``: the budget of each run;
- ``params``: bindings for every run; ``arm_params``: label -> bindings of that arm;
- ``target``: the return ``alf.bin.compare`` reports first reaching;
- ``seeds`` (default 0-4); ``metrics`` (default the greedy evaluation return and the
  training return; a run without evaluation compares ``train_return`` only).

Each run is ``python -m alf.bin.train --conf=<arm> --root_dir=<root>/<task>/<arm>_s<seed>
--conf_param TrainerConfig.random_seed=<seed> ...``; ``--parallel 2`` trains two at once
(one per core). A finished run (the curve of the task's first metric reaches the budget)
is read, not rerun. Then for each metric ``alf.bin.compare`` writes
``<root>/<task>/compare_<metric>/{compare.md,curves.png,...}``; the script prints the
tables, each run's wall time and the machine's load.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from rnd_exploration import read_csv as read_curve  # noqa: E402
from train_runs import run_train  # noqa: E402

#: the csv file and column each metric is read from, in a run directory (alf.bin.compare's)
METRIC_FILES = {"eval_return": ("eval.csv", "eval_return"),
                "train_return": ("progress.csv", "average_return")}
DEFAULT_METRICS = ("eval_return", "train_return")


def metrics_of(spec: Dict) -> List[str]:
    """The task's metrics, the first deciding when a run is finished."""
    return list(spec.get("metrics", DEFAULT_METRICS))


def finished(run_dir: str, env_steps: int, metric: str) -> bool:
    """Whether ``run_dir``'s ``metric`` curve reaches ``env_steps``."""
    rows = read_curve(os.path.join(run_dir, METRIC_FILES[metric][0]), "env_steps")
    return bool(rows) and rows[-1][0] >= env_steps


def train(name: str, tasks: Dict[str, Dict], task: str, arm: str, seed: int, a) -> Dict:
    """One run (or the finished one already there): its directory, wall time and last
    value of the task's first metric."""
    spec = tasks[task]
    metric = metrics_of(spec)[0]
    run_dir = os.path.join(a.root, task, f"{arm}_s{seed}")
    params = list(spec["params"]) + [f"TrainerConfig.num_env_steps={a.env_steps}",
                                     f"TrainerConfig.random_seed={seed}",
                                     "TrainerConfig.checkpoint_interval=1000000"]
    params += list(spec.get("arm_params", {}).get(arm, ())) + list(a.conf_param)
    wall_file = run_dir + ".wall_s"
    if not finished(run_dir, a.env_steps, metric):
        if os.path.exists(run_dir):
            raise SystemExit(f"{run_dir} exists but did not finish: remove it and rerun")
        print(f"[{name}] {task} {arm} seed {seed} -> {run_dir}", flush=True)
        t0 = time.time()
        out = run_train([f"--conf={spec['arms'][arm]}"], run_dir, params)
        with open(run_dir + ".log", "w") as f:
            f.write(out)
        with open(wall_file, "w") as f:
            f.write(f"{time.time() - t0:.1f}\n")
    wall = float(open(wall_file).read()) if os.path.exists(wall_file) else None
    file, column = METRIC_FILES[metric]
    curve = read_curve(os.path.join(run_dir, file), column)
    last = curve[-1][1] if curve else None
    print(f"[{name}] {task} {arm} seed {seed}: final {metric} {last}, wall {wall} s",
          flush=True)
    out = {"arm": arm, "seed": seed, "run_dir": run_dir, "wall_s": wall, f"final_{metric}": last}
    if metric == "eval_return":
        out["final_eval"] = last  # the key earlier runs.json files have
    return out


def compare(tasks: Dict[str, Dict], task: str, metric: str, a) -> str:
    """``alf.bin.compare`` over the arms' runs for ``metric``; its markdown table."""
    out_dir = os.path.join(a.root, task, f"compare_{metric}")
    cmd = [sys.executable, "-m", "alf.bin.compare", "--metric", metric,
           "--target", str(tasks[task]["target"]), "--out_dir", out_dir,
           "--max_steps", str(a.env_steps)]
    for arm in tasks[task]["arms"]:
        seeds = "[" + "".join(sorted({str(s) for s in a.seeds})) + "]" \
            if all(0 <= s <= 9 for s in a.seeds) else "*"
        cmd += ["--group", f"{arm}={os.path.join(a.root, task, arm)}_s{seeds}"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}")
    return proc.stdout


def main(name: str, tasks: Dict[str, Dict], doc: str, argv: Optional[List[str]] = None) -> int:
    """The command line of a benchmark script named ``name`` over ``tasks``."""
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=sorted(tasks), required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="default: the task's (0-4 unless it names others)")
    p.add_argument("--env_steps", type=int, default=None,
                   help="budget per run (default: the task's)")
    p.add_argument("--arms", nargs="+", default=None, help="default: all of the task's")
    p.add_argument("--conf_param", action="append", default=[],
                   help="an extra binding for every run (repeatable)")
    p.add_argument("--parallel", type=int, default=1, help="runs at once")
    p.add_argument("--root", default=os.path.join(ROOT, "runs", name))
    a = p.parse_args(argv)
    a.root = os.path.abspath(a.root)
    spec = tasks[a.task]
    a.env_steps = a.env_steps or spec["env_steps"]
    a.seeds = a.seeds or spec.get("seeds", [0, 1, 2, 3, 4])
    arms = a.arms or list(spec["arms"])
    print(f"[{name}] start: {subprocess.getoutput('uptime').strip()}", flush=True)
    jobs = [(arm, s) for s in a.seeds for arm in arms]
    with ThreadPoolExecutor(max_workers=max(1, a.parallel)) as pool:
        results = list(pool.map(lambda job: train(name, tasks, a.task, job[0], job[1], a),
                                jobs))
    print(f"[{name}] end: {subprocess.getoutput('uptime').strip()}", flush=True)
    walls = [r["wall_s"] for r in results if r["wall_s"] is not None]
    if walls:
        print(f"wall time per run: max {max(walls) / 60:.1f} min, mean "
              f"{sum(walls) / len(walls) / 60:.1f} min ({len(walls)} runs, "
              f"{a.parallel} at once)")
    with open(os.path.join(a.root, a.task, "runs.json"), "w") as f:
        json.dump(results, f, indent=1)
    if set(arms) == set(spec["arms"]):
        for metric in metrics_of(spec):
            print(f"\n## {a.task}: {metric}\n")
            print(compare(tasks, a.task, metric, a))
    return 0
