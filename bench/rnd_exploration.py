"""Does RND's exploration bonus help PPO on a sparse-reward task? PPO vs PPO+RND on
gymnasium's MountainCar-v0, same PPO settings, same seeds.

    python bench/rnd_exploration.py --seeds 0 1 2 --env_steps 300000 --parallel 2

MountainCar-v0 gives -1 per step until the car reaches the flag (200-step time limit),
so a policy that never gets there scores -200. Per seed, two runs of
``python -m alf.bin.train --conf=ppo_cart_pole.gin`` (rl-zoo's CartPole PPO: 8 envs x
32-step unroll, one 256-sample mini-batch x 20 epochs, GAE 0.8, gamma 0.98, lr 1e-3 and
clip 0.2 annealed to 0, no entropy bonus) with the same ``--conf_param`` overrides
(:func:`common_params`: the env, the budget, ``@ObservationNormalizer``, a greedy
evaluation of 10 episodes every ``--eval_interval`` iterations):

(a) ``ppo``: PPOAlgorithm alone;
(b) ``ppo_rnd``: an :class:`~alf.algorithms.agent.Agent` around the same PPOAlgorithm
    with an :class:`~alf.algorithms.rnd_reward_module.RNDRewardModule`, in gin only
    (:func:`rnd_params`; PPO learns one value per reward column: the extrinsic one with
    PPO's gamma, RND's with gamma 0.99, non-episodic).

Reported per seed and as the mean over seeds: the env step at which the goal was first
reached, (i) by the greedy evaluation (``eval.csv``: an evaluation return > -200) and
(ii) in training (``progress.csv``: the mean return of the last 20 training episodes
> -200, i.e. some training episode reached the flag; checked every 5 iterations), and
the env step at which that mean training return first exceeded -150 (episodes
reach the flag in 150 steps on average: the policy has learned it, not just found
it), and the final greedy evaluation return. Writes a markdown table (printed, and
``bench/results/<name>.md``), the raw numbers and curves (``bench/results/<name>.json``)
and a plot of both returns vs env steps, both arms, one line per seed
(``bench/results/<name>.png``); ``<name>`` is ``--name`` (default ``rnd_exploration``).

Runs are kept under ``--root/<name>/<arm>_s<seed>``; a finished run (its ``eval.csv``
ends at the budget) is read, not rerun (the script stops if its settings differ). ``--parallel 2`` trains two runs at once (one
per core). The tuning runs (tuning seeds, never the reported ones; a different
``--name``)::

    python bench/rnd_exploration.py --seeds 10 11 --env_steps 300000 --parallel 2 --name rnd_exploration_tune_w0.1 --rnd_weight 0.1
    python bench/rnd_exploration.py --seeds 10 11 --env_steps 300000 --parallel 2 --name rnd_exploration_tune_w1 --arms ppo_rnd
"""
import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from train_runs import run_train  # noqa: E402

GOAL = -200.0  # MountainCar-v0: an episode that never reaches the flag returns exactly -200
MOSTLY = -150.0  # a mean training return above this: the flag is reached routinely
ARMS = ("ppo", "ppo_rnd")
LABELS = {"ppo": "PPO", "ppo_rnd": "PPO+RND"}


def common_params(a) -> List[str]:
    """The bindings both arms share, on top of ppo_cart_pole.gin."""
    return ['create_environment.env_name="MountainCar-v0"',
            f"create_environment.num_parallel_environments={a.num_envs}",
            f"TrainerConfig.num_env_steps={a.env_steps}",
            "TrainerConfig.data_transformer_ctor=@ObservationNormalizer",
            "TrainerConfig.evaluate=True",
            f"TrainerConfig.eval_interval={a.eval_interval}",
            "TrainerConfig.num_eval_episodes=10",
            "TrainerConfig.num_eval_environments=5",
            "TrainerConfig.checkpoint_interval=1000000"] + list(a.conf_param)


def rnd_params(a) -> List[str]:
    """The PPO+RND arm's extra bindings: an Agent with an RND reward module (as
    alf/examples/ppo_rnd_cart_pole.gin, with ``--rnd_weight``, ``--rnd_lr``, ``--rnd_gamma``)."""
    return ["TrainerConfig.algorithm_ctor=@Agent",
            "Agent.rl_algorithm_cls=@PPOAlgorithm",
            "Agent.reward_modules=[@RNDRewardModule]",
            f"Agent.reward_weights=[1.0, {a.rnd_weight}]",
            "RNDRewardModule.fc_layer_params=(64, 64)",
            "RNDRewardModule.feature_size=64",
            f"RNDRewardModule.gamma={a.rnd_gamma}",
            "RNDRewardModule.optimizer=@rnd/alf.optimizers.Adam()",
            f"rnd/alf.optimizers.Adam.lr={a.rnd_lr}",
            "rnd/alf.optimizers.Adam.gradient_clipping=None"] + list(a.rnd_param)


def read_csv(path: str, column: str) -> List[Tuple[int, float]]:
    """``(env_steps, column)`` of the rows of a run's csv that have the column."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [(int(r["env_steps"]), float(r[column])) for r in csv.DictReader(f)
                if r.get(column)]


def finished(run_dir: str, env_steps: int) -> bool:
    evals = read_csv(os.path.join(run_dir, "eval.csv"), "eval_return")
    return bool(evals) and evals[-1][0] >= env_steps


def first_above(curve: List[Tuple[int, float]], bar: float) -> Optional[int]:
    return next((s for s, r in curve if r > bar), None)


def train(arm: str, seed: int, a) -> Dict:
    """One run (or the finished one already there); its numbers and curves."""
    run_dir = os.path.join(a.root, a.name, f"{arm}_s{seed}")
    params = common_params(a) + [f"TrainerConfig.random_seed={seed}"]
    if arm == "ppo_rnd":
        params += rnd_params(a)
    wall = None
    params_file = run_dir + ".params.json"
    if not finished(run_dir, a.env_steps):
        if os.path.exists(run_dir):
            raise SystemExit(f"{run_dir} exists but did not finish: remove it and rerun")
        print(f"[rnd_exploration] {arm} seed {seed} -> {run_dir}", flush=True)
        t0 = time.time()
        out = run_train(["--conf=ppo_cart_pole.gin"], run_dir, params)
        wall = time.time() - t0
        with open(run_dir + ".log", "w") as f:
            f.write(out)
        with open(params_file, "w") as f:
            json.dump(params, f)
    elif os.path.exists(params_file):
        with open(params_file) as f:
            if json.load(f) != params:
                raise SystemExit(f"{run_dir} was trained with other settings (see "
                                 f"{params_file}): use another --name or --root")
    evals = read_csv(os.path.join(run_dir, "eval.csv"), "eval_return")
    trains = read_csv(os.path.join(run_dir, "progress.csv"), "average_return")
    fps = read_csv(os.path.join(run_dir, "progress.csv"), "fps")
    res = {"arm": arm, "seed": seed, "run_dir": run_dir, "params": params,
           "first_goal_eval": first_above(evals, GOAL),
           "first_goal_train": first_above(trains, GOAL),
           "first_train_above_150": first_above(trains, MOSTLY),
           "final_eval": evals[-1][1] if evals else None,
           "best_eval": max(r for _, r in evals) if evals else None,
           "final_train": trains[-1][1] if trains else None,
           "evals_above_goal": sum(r > GOAL for _, r in evals), "num_evals": len(evals),
           "fps": fps[-1][1] if fps else None, "wall_s": wall,
           "eval_curve": evals, "train_curve": trains}
    print(f"[rnd_exploration] {arm} seed {seed}: goal first reached at "
          f"{res['first_goal_eval']} (eval) / {res['first_goal_train']} (train) env steps; "
          f"final eval {res['final_eval']}", flush=True)
    return res


def steps(x: Optional[int]) -> str:
    return "never" if x is None else f"{x:,}"


def table(results: List[Dict], seeds: List[int], env_steps: int) -> str:
    head = ["arm", "seed", "goal first reached: greedy eval (env steps)",
            "goal first reached: training episode (env steps)",
            "training return first > -150 (env steps)",
            f"final greedy eval return ({env_steps:,} steps)", "best greedy eval return",
            "evals > -200"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in ARMS:
        rs = [r for r in results if r["arm"] == arm]
        if not rs:
            continue
        for r in rs:
            lines.append(f"| {LABELS[arm]} | {r['seed']} | {steps(r['first_goal_eval'])} | "
                         f"{steps(r['first_goal_train'])} | "
                         f"{steps(r['first_train_above_150'])} | {r['final_eval']:.1f} | "
                         f"{r['best_eval']:.1f} | {r['evals_above_goal']}/{r['num_evals']} |")
        reached_e = [r["first_goal_eval"] for r in rs if r["first_goal_eval"] is not None]
        reached_t = [r["first_goal_train"] for r in rs if r["first_goal_train"] is not None]
        mostly = [r["first_train_above_150"] for r in rs
                  if r["first_train_above_150"] is not None]

        def mean_steps(xs: List[int]) -> str:
            return f"{len(xs)}/{len(rs)} seeds" + (
                f", mean {sum(xs) / len(xs):,.0f} over those" if xs else "")

        finals = [r["final_eval"] for r in rs]
        bests = [r["best_eval"] for r in rs]
        lines.append(f"| **{LABELS[arm]}** | **mean** | **{mean_steps(reached_e)}** | "
                     f"**{mean_steps(reached_t)}** | **{mean_steps(mostly)}** | "
                     f"**{sum(finals) / len(finals):.1f}** | "
                     f"**{sum(bests) / len(bests):.1f}** | |")
    return "\n".join(lines) + "\n"


def plot(results: List[Dict], path: str, env_steps: int) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install -e '.[plot]')")
        return
    colors = {"ppo": "tab:blue", "ppo_rnd": "tab:orange"}
    styles = ["-", "--", ":", "-."]
    seeds = sorted({r["seed"] for r in results})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key, title in ((axes[0], "eval_curve", "greedy evaluation return (10 episodes)"),
                           (axes[1], "train_curve",
                            "training return (mean of the last 20 episodes)")):
        for r in results:
            xs, ys = zip(*r[key]) if r[key] else ([], [])
            ax.plot(xs, ys, color=colors[r["arm"]],
                    linestyle=styles[seeds.index(r["seed"]) % len(styles)], linewidth=1.3,
                    label=f"{LABELS[r['arm']]} seed {r['seed']}")
        ax.axhline(GOAL, color="grey", linewidth=0.8)
        ax.set_xlabel("env steps")
        ax.set_title(title, fontsize=10)
        ax.set_xlim(0, env_steps)
    axes[0].set_ylabel("return (-200: goal never reached)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle("MountainCar-v0: PPO vs PPO+RND (same PPO settings)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def machine() -> Dict:
    info = {"nproc": os.cpu_count(), "platform": platform.platform()}
    for cmd, key in ((["uptime"], "uptime"), (["lscpu"], "lscpu")):
        try:
            out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True).stdout
        except OSError:
            continue
        if key == "lscpu":
            out = next((ln.split(":", 1)[1] for ln in out.splitlines()
                        if ln.startswith("Model name")), "")
            key = "cpu"
        info[key] = out.strip()
    return info


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--env_steps", type=int, default=300000)
    p.add_argument("--num_envs", type=int, default=8)
    p.add_argument("--eval_interval", type=int, default=20,
                   help="iterations between greedy evaluations (20 = 5,120 env steps)")
    p.add_argument("--rnd_weight", type=float, default=1.0,
                   help="the RND column's advantage weight (extrinsic: 1); 1.0 was chosen "
                        "over 0.1 on the tuning seeds 10 and 11 (docs/benchmarks.md)")
    p.add_argument("--rnd_lr", type=float, default=1e-4, help="RND predictor's Adam lr")
    p.add_argument("--rnd_gamma", type=float, default=0.99, help="RND column's discount")
    p.add_argument("--conf_param", action="append", default=[],
                   help="an extra binding for both arms (repeatable)")
    p.add_argument("--rnd_param", action="append", default=[],
                   help="an extra binding for the PPO+RND arm only (repeatable)")
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    p.add_argument("--parallel", type=int, default=1, help="runs at once")
    p.add_argument("--root", default=os.path.join(ROOT, "runs", "rnd_exploration"))
    p.add_argument("--name", default="rnd_exploration",
                   help="run subdirectory and bench/results/<name>.{md,json,png}")
    a = p.parse_args(argv)
    a.root = os.path.abspath(a.root)
    start = machine()
    t0 = time.time()
    jobs = [(arm, seed) for seed in a.seeds for arm in a.arms]
    with ThreadPoolExecutor(max(1, a.parallel)) as pool:
        results = list(pool.map(lambda job: train(job[0], job[1], a), jobs))
    wall = time.time() - t0
    text = table(results, a.seeds, a.env_steps)
    note = (f"\nMountainCar-v0, {a.env_steps:,} env steps per run, seeds "
            f"{', '.join(map(str, a.seeds))}; RND weight {a.rnd_weight}, RND lr {a.rnd_lr}, "
            f"RND gamma {a.rnd_gamma}; wall {wall / 60:.1f} min for the runs made now; "
            f"uptime at start: {start.get('uptime')}\n")
    print("\n" + text + note)
    out_dir = os.path.join(HERE, "results")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, a.name + ".md"), "w") as f:
        f.write(text + note)
    with open(os.path.join(out_dir, a.name + ".json"), "w") as f:
        json.dump({"command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                   "env": "MountainCar-v0", "goal_bar": GOAL, "env_steps": a.env_steps,
                   "seeds": a.seeds, "rnd_weight": a.rnd_weight, "rnd_lr": a.rnd_lr,
                   "rnd_gamma": a.rnd_gamma, "wall_s": wall, "machine_start": start,
                   "machine_end": machine(), "runs": results}, f, indent=1)
    plot(results, os.path.join(out_dir, a.name + ".png"), a.env_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
