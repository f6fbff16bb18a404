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
"""
import argparse
import os
import re
import subprocess
import sys
from typing import Dict, List, Tuple

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


def ppo(root_dir: str, bc: str, seed: int, env_steps: int, from_bc: bool) -> Tuple[float, float]:
    """(first, last) greedy evaluation return of one PPO run."""
    params = [f"TrainerConfig.random_seed={seed}", f"TrainerConfig.num_env_steps={env_steps}",
              f"bc_actor/pretrained.checkpoint='_actor@{bc}'"]
    if not from_bc:
        params.append("PPOAlgorithm.actor_network_ctor=@bc_actor/ActorDistributionNetwork")
    args = ["alf.bin.train", "--conf=ppo_pendulum_from_bc.gin", f"--root_dir={root_dir}"]
    for p in params:
        args += ["--conf_param", p]
    evals = [float(m.group(2)) for m in EVAL_LINE.finditer(run(args, root_dir + ".log"))]
    if not evals:
        raise SystemExit(f"{root_dir}: no evaluation line in {root_dir}.log")
    return evals[0], evals[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/pretrained")
    parser.add_argument("--bc_root", default=None, help="a finished bc_pendulum.gin run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--env_steps", type=int, default=20000)
    a = parser.parse_args()
    root = os.path.abspath(a.root)
    os.makedirs(root, exist_ok=True)
    bc = os.path.abspath(a.bc_root) if a.bc_root else bc_run(root)
    rows: Dict[str, List[Tuple[float, float]]] = {"PPO from BC": [], "PPO from scratch": []}
    for seed in a.seeds:
        for name, from_bc in (("PPO from BC", True), ("PPO from scratch", False)):
            tag = "from_bc" if from_bc else "scratch"
            rows[name].append(ppo(os.path.join(root, f"ppo_{tag}_s{seed}_{a.env_steps}"), bc,
                                  seed, a.env_steps, from_bc))
    print(f"\n| start | seeds ({', '.join(map(str, a.seeds))}): first eval -> eval at "
          f"{a.env_steps:,} env steps | mean at the end |")
    print("|---|---|---|")
    for name, results in rows.items():
        cells = ", ".join(f"{f:.0f} -> {l:.0f}" for f, l in results)
        print(f"| {name} | {cells} | {sum(l for _, l in results) / len(results):.0f} |")


if __name__ == "__main__":
    main()
