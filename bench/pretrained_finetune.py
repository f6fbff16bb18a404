"""PPO on Pendulum fine-tuned from a BC actor vs PPO from scratch, at equal env steps.

    python bench/pretrained_finetune.py --root runs/pretrained --seeds 0 1 2 --env_steps 20000

1. a BC run: ``--bc_root`` if given, else the Pendulum pipeline's (a SAC expert,
   its greedy dataset of 10,000 steps, ``bc_pendulum.gin``), each step skipped when
   its output exists;
2. per seed, ``ppo_pendulum_from_bc.gin`` twice with the same settings: its actor
   loaded from the BC run (``_actor@<bc run>``) and built from scratch
   (``PPOAlgorithm.actor_network_ctor=@bc_actor/ActorDistributionNetwork``: the same
   network, random initial weights);
3. a markdown table of the greedy evaluation return (10 episodes) at the first
   evaluation and at the end, per seed and as the mean.

Optional: ``--eval_interval N`` evaluates every N iterations (1,024 env steps each;
the gin's 10 when not given), ``--json PATH`` writes the table, every run's
first/final return and its evaluation curve (``eval.csv``) and the BC and expert
returns from the logs, ``--plot PATH`` draws the curves (one line per run).
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EVAL_LINE = re.compile(r"eval at iter ([\d,]+): return (-?[\d.]+) over (\d+) episodes")


def run(args: List[str], log: str) -> str:
    """``python -m <args>`` from the repository root; stderr kept in ``log``."""
    cmd = [sys.executable, "-m"] + args
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    with open(log, "w") as f:
        f.write(p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stderr


def bc_run(root: str) -> str:
    """The Pendulum pipeline up to BC (docs/offline.md), reusing what exists."""
    sac, data, bc = (os.path.join(root, n) for n in ("sac_pendulum", "pendulum_expert",
                                                      "bc_pendulum"))
    if not os.path.exists(os.path.join(sac, "train")):
        run(["alf.bin.train", "--conf=sac_pendulum.gin", f"--root_dir={sac}"], sac + ".log")
    if not os.path.exists(data):
        run(["alf.bin.export_dataset", f"--root_dir={sac}", f"--out={data}",
             "--collect_steps=10000", "--policy=greedy", "--num_envs=4", "--seed=1"],
            data + ".log")
    if not os.path.exists(os.path.join(bc, "train")):
        run(["alf.bin.train", "--conf=bc_pendulum.gin", f"--root_dir={bc}",
             "--conf_param", f"TrainerConfig.offline_buffer_dir='{data}'"], bc + ".log")
    return bc


def ppo(root_dir: str, bc: str, seed: int, env_steps: int, from_bc: bool,
        eval_interval: int = 0) -> Tuple[float, float]:
    """(first, last) greedy evaluation return of one PPO run."""
    params = [f"TrainerConfig.random_seed={seed}", f"TrainerConfig.num_env_steps={env_steps}",
              f"bc_actor/pretrained.checkpoint='_actor@{bc}'"]
    if eval_interval:
        params.append(f"TrainerConfig.eval_interval={eval_interval}")
    if not from_bc:
        params.append("PPOAlgorithm.actor_network_ctor=@bc_actor/ActorDistributionNetwork")
    args = ["alf.bin.train", "--conf=ppo_pendulum_from_bc.gin", f"--root_dir={root_dir}"]
    for p in params:
        args += ["--conf_param", p]
    evals = [float(m.group(2)) for m in EVAL_LINE.finditer(run(args, root_dir + ".log"))]
    if not evals:
        raise SystemExit(f"{root_dir}: no evaluation line in {root_dir}.log")
    return evals[0], evals[-1]


def eval_curve(root_dir: str) -> List[Tuple[int, float]]:
    """(env steps, greedy eval return) of each evaluation, from ``root_dir/eval.csv``."""
    with open(os.path.join(root_dir, "eval.csv")) as f:
        return [(int(r["env_steps"]), float(r["eval_return"])) for r in csv.DictReader(f)]


def last_eval(log: str) -> Optional[float]:
    """The last ``eval at iter`` return printed in a log (None when there is none)."""
    if not os.path.exists(log):
        return None
    evals = [float(m.group(2)) for m in EVAL_LINE.finditer(open(log).read())]
    return evals[-1] if evals else None


def plot(curves: Dict[str, Dict[int, List[Tuple[int, float]]]], bc_return: Optional[float],
         path: str) -> None:
    """Greedy eval return vs env steps, one line per run (colour: arm; style: seed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = ["-", "--", ":", "-."]
    for (name, runs), colour in zip(curves.items(), ["tab:blue", "tab:orange"]):
        for i, (seed, curve) in enumerate(runs.items()):
            ax.plot([s for s, _ in curve], [r for _, r in curve], styles[i % len(styles)],
                    color=colour, marker=".", ms=3, lw=1.2, label=f"{name}, seed {seed}")
    if bc_return is not None:
        ax.axhline(bc_return, color="grey", lw=0.8, ls="--",
                   label=f"BC actor before fine-tuning ({bc_return:.0f})")
    ax.set_xlabel("env steps")
    ax.set_ylabel("greedy eval return (10 episodes)")
    ax.set_title("PPO on Pendulum-v1: actor from BC vs from scratch")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/pretrained")
    parser.add_argument("--bc_root", default=None, help="a finished bc_pendulum.gin run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--env_steps", type=int, default=20000)
    parser.add_argument("--eval_interval", type=int, default=0,
                        help="iterations between evaluations (0: the gin's)")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--plot", default=None, help="draw the eval curves here (.png)")
    a = parser.parse_args()
    root = os.path.abspath(a.root)
    os.makedirs(root, exist_ok=True)
    bc = os.path.abspath(a.bc_root) if a.bc_root else bc_run(root)
    rows: Dict[str, List[Tuple[float, float]]] = {"PPO from BC": [], "PPO from scratch": []}
    curves: Dict[str, Dict[int, List[Tuple[int, float]]]] = {n: {} for n in rows}
    for seed in a.seeds:
        for name, from_bc in (("PPO from BC", True), ("PPO from scratch", False)):
            tag = "from_bc" if from_bc else "scratch"
            run_dir = os.path.join(root, f"ppo_{tag}_s{seed}_{a.env_steps}")
            rows[name].append(ppo(run_dir, bc, seed, a.env_steps, from_bc, a.eval_interval))
            if a.json or a.plot:
                curves[name][seed] = eval_curve(run_dir)
    table = [f"| start | seeds ({', '.join(map(str, a.seeds))}): first eval -> eval at "
             f"{a.env_steps:,} env steps | mean at the end |", "|---|---|---|"]
    for name, results in rows.items():
        cells = ", ".join(f"{f:.0f} -> {l:.0f}" for f, l in results)
        table.append(f"| {name} | {cells} | {sum(l for _, l in results) / len(results):.0f} |")
    print("\n" + "\n".join(table))
    bc_return = last_eval(bc + ".log")
    expert = re.findall(r"\[collect\] done:.*average return (-?[\d,.]+)",
                        open(os.path.join(root, "pendulum_expert.log")).read()) \
        if os.path.exists(os.path.join(root, "pendulum_expert.log")) else []
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "root": root, "bc_run": bc,
                       "seeds": a.seeds, "env_steps": a.env_steps,
                       "eval_interval": a.eval_interval or "gin default",
                       "bc_greedy_return": bc_return,
                       "expert_dataset_return": float(expert[-1].replace(",", ""))
                       if expert else None, "table": table,
                       "runs": {name: [{"seed": s, "first_eval": fl[0], "final_eval": fl[1],
                                        "curve": curves[name].get(s)}
                                       for s, fl in zip(a.seeds, results)]
                                for name, results in rows.items()}}, f, indent=1)
    if a.plot:
        plot(curves, bc_return, a.plot)


if __name__ == "__main__":
    main()
