"""PPO and APPO (asynchronous collection) on the two action-nest tasks: learning curves.

    python bench/action_nest_learning.py --seeds 0 1 2
    python bench/action_nest_learning.py --replot     # the plots again from the JSON

Tasks (alf/examples/action_nest_envs.py): GridMove-v0, a ``MultiDiscrete([3, 3])`` grid
move (``ppo_grid_multidiscrete.gin`` / ``appo_grid_multidiscrete.gin``), and
HybridTarget-v0, a ``Dict(sign=Discrete(2), size=Box(0, 1, (1,)))`` action
(``ppo_hybrid_action.gin`` / ``appo_hybrid_action.gin``). For each task, algorithm and
seed runs ``python -m alf.bin.train`` (one after the other, each example's own settings
with ``random_seed`` and ``num_env_steps`` overridden) and reads the run's
``progress.csv`` (mean training return of the recent episodes vs env steps). Random
play's return and the optimum are measured here on 2,000 episodes each (uniform actions
from the action space; the oracle that moves straight to the goal / hits the target).
Prints a Markdown table (return at a few env-step points per seed), writes
``bench/results/action_nest_learning.json`` and one plot per task,
``docs/images/action_nest_<task>.png`` (each seed faint, the mean over seeds bold).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from learning_curves import read_progress  # noqa: E402

RESULTS = os.path.join(HERE, "results", "action_nest_learning.json")
COLORS = {"PPO": "tab:blue", "APPO": "tab:orange"}
TASKS = {
    "grid": dict(env="GridMove-v0", steps=20480, confs={
        "PPO": "ppo_grid_multidiscrete.gin", "APPO": "appo_grid_multidiscrete.gin"}),
    "hybrid": dict(env="HybridTarget-v0", steps=40960, confs={
        "PPO": "ppo_hybrid_action.gin", "APPO": "appo_hybrid_action.gin"}),
}
Curve = List[Tuple[int, float]]


def train(conf: str, seed: int, steps: int, root: str) -> Curve:
    """``[(env_steps, average_return), ...]`` of one ``alf.bin.train`` run of ``conf``
    (a run already finished under ``root`` is read, not repeated)."""
    run_dir = os.path.join(root, f"{os.path.splitext(conf)[0]}_seed{seed}")
    progress = os.path.join(run_dir, "progress.csv")
    if not (os.path.exists(progress) and read_progress(progress)[0][-1:] == [steps]):
        subprocess.run([sys.executable, "-m", "alf.bin.train", f"--conf={conf}",
                        f"--root_dir={run_dir}", "--quiet",
                        "--conf_param", f"TrainerConfig.random_seed={seed}",
                        "--conf_param", f"TrainerConfig.num_env_steps={steps}"],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    env_steps, returns, _ = read_progress(progress)
    return list(zip(env_steps, returns))


def _grid_oracle(obs: np.ndarray, _space) -> np.ndarray:
    return (np.sign(np.round(obs * 6)) + 1).astype(np.int64)  # step toward the goal


def _hybrid_oracle(obs: np.ndarray, _space) -> Dict:
    return {"sign": int(obs[0] > 0), "size": np.abs(obs).astype(np.float32)}


def _uniform(_obs, space):
    return space.sample()


def episode_return(env_id: str, policy: Callable, episodes: int = 2000) -> float:
    """Mean undiscounted return of ``policy(obs, action_space)`` over ``episodes``."""
    import gymnasium as gym
    import alf.examples.action_nest_envs  # noqa: F401  (registers the ids)
    env = gym.make(env_id)
    env.action_space.seed(0)
    total = 0.0
    for i in range(episodes):
        obs, _ = env.reset(seed=i)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs, env.action_space))
            total += reward
            done = terminated or truncated
    return round(total / episodes, 2) + 0.0  # + 0.0: no "-0.00" for the oracle's -1e-7


def at(curve: Curve, step: int) -> float:
    """The return of the last progress row at or before ``step`` (NaN if none)."""
    before = [r for s, r in curve if s <= step]
    return before[-1] if before else float("nan")


def table(task: str, res: Dict) -> str:
    """Markdown: return at the first progress row, at an eighth, a quarter, half, three
    quarters and the end of the budget."""
    algs = list(res["curves"])
    seeds = list(res["curves"][algs[0]])
    first = res["curves"][algs[0]][seeds[0]]
    marks = sorted({first[0][0]} | {at_or_last(first, res["steps"] * q // 8)
                                    for q in (1, 2, 4, 6, 8)})
    head = " | ".join(f"{a} seed {s}" for a in algs for s in seeds)
    lines = [f"| {TASKS[task]['env']} env steps | {head} |",
             "|---" + "|---:" * (len(algs) * len(seeds)) + "|"]
    for m in marks:
        cells = " | ".join(f"{at(res['curves'][a][s], m):.2f}" for a in algs for s in seeds)
        lines.append(f"| {m:,} | {cells} |")
    return "\n".join(lines)


def at_or_last(curve: Curve, step: int) -> int:
    """The env-step count of the last progress row at or before ``step``."""
    return [s for s, _ in curve if s <= step][-1]


def plot(task: str, res: Dict, path: str) -> None:
    """Each seed's curve (faint) and the mean over seeds (bold) of each algorithm, with
    random play's return and the optimum as horizontal lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    grid = np.linspace(0, res["steps"], 100)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for alg, by_seed in res["curves"].items():
        rows = []
        for seed, curve in by_seed.items():
            xs, ys = zip(*curve)
            ax.plot(xs, ys, lw=0.8, alpha=0.35, color=COLORS[alg])
            values = np.interp(grid, xs, ys)
            values[grid < xs[0]] = np.nan
            rows.append(values)
        ax.plot(grid, np.mean(rows, axis=0), lw=2.2, color=COLORS[alg],
                label=f"{alg} ({res['confs'][alg]}), mean of {len(rows)} seeds")
    ax.axhline(res["optimum"], color="tab:green", ls="--", lw=1.2,
               label=f"optimum {res['optimum']:.2f}")
    ax.axhline(res["random"], color="grey", ls=":", lw=1.2,
               label=f"random play {res['random']:.2f}")
    ax.set(xlabel="env steps", ylabel="training return (stochastic policy)",
           xlim=(0, res["steps"]), title=f"PPO and APPO (async), {res['env']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=list(TASKS))
    parser.add_argument("--root", default=None,
                        help="keep the runs under this directory (finished ones are reused)")
    parser.add_argument("--replot", action="store_true",
                        help=f"no training: tables and plots from {RESULTS}")
    args = parser.parse_args()
    if args.replot:
        with open(RESULTS) as f:
            results = json.load(f)
    else:
        root = args.root or tempfile.mkdtemp(prefix="alf_action_nests_")
        results = {}
        for task in args.tasks:
            spec = TASKS[task]
            oracle = _grid_oracle if task == "grid" else _hybrid_oracle
            results[task] = dict(
                env=spec["env"], steps=spec["steps"], confs=spec["confs"],
                random=episode_return(spec["env"], _uniform),
                optimum=episode_return(spec["env"], oracle),
                curves={alg: {str(s): train(conf, s, spec["steps"], root) for s in args.seeds}
                        for alg, conf in spec["confs"].items()})
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        with open(RESULTS, "w") as f:
            json.dump(results, f)
    for task, res in results.items():
        print(f"\n{res['env']}: random play {res['random']:.2f}, optimum "
              f"{res['optimum']:.2f} an episode\n{table(task, res)}")
        plot(task, res, os.path.join(ROOT, "docs", "images", f"action_nest_{task}.png"))


if __name__ == "__main__":
    main()
