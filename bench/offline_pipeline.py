"""The offline pipeline end to end: datasets from a SAC run, then BC and IQL on them.

    python bench/offline_pipeline.py pendulum --root runs/offline
    python bench/offline_pipeline.py halfcheetah --root runs/offline \
        --sac_root runs/offline/sac_hc_online --checkpoint 40000

Pendulum (the BC and IQL bars of issue 11):

1. ``sac_pendulum.gin`` trained (``--root/sac_pendulum``, reused when present);
2. an expert dataset: its greedy policy for 10,000 env steps, and a random-policy
   dataset of 10,000 steps;
3. BC on the expert dataset; BC and IQL on expert + random (``offline_buffer_dir``
   given both datasets);
4. the expert and every trained policy evaluated greedily on the same 20 episodes
   (a freshly seeded 4-env evaluation env each: the same initial states).

HalfCheetah: a "medium" dataset of 100,000 steps collected with the stochastic
policy of a SAC checkpoint at about a third of that run's final return
(``--checkpoint``: the iteration), then BC and IQL on it, evaluated over 10 episodes.

HalfCheetah IQL's rewards are scaled by ``1000 / (max - min)`` of the dataset's episode
returns, the paper's normalisation for its locomotion tasks (the scale goes into the run's
config; Pendulum's rewards are used as they are).

Each step is skipped when its output exists, so an interrupted pipeline resumes.
Results go to ``bench/results/offline_<env>.json`` and a markdown table to stdout.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from typing import List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EVAL_LINE = re.compile(r"eval at iter ([\d,]+): return (-?[\d.]+) over (\d+) episodes")


def run(cmd: List[str], log: str) -> str:
    """Run ``cmd`` from the repo root, tee stderr into ``log``; raise on failure."""
    print("+", " ".join(cmd), flush=True)
    with open(log, "w") as f:
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        f.write(p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p.stderr


def train(conf: str, root_dir: str, params: List[str]) -> Optional[float]:
    """Train (unless ``root_dir`` holds a finished run) and return the final evaluation."""
    log = root_dir + ".log"
    done = root_dir + ".done"
    if not os.path.exists(done):
        shutil.rmtree(root_dir, ignore_errors=True)
        cmd = [sys.executable, "-m", "alf.bin.train", f"--conf={conf}", f"--root_dir={root_dir}"]
        for p in params:
            cmd += ["--conf_param", p]
        run(cmd, log)
        open(done, "w").close()
    evals = EVAL_LINE.findall(open(log).read())
    return float(evals[-1][1]) if evals else None


def collect(out: str, steps: int, policy: str, source: List[str], extra: List[str] = ()) -> None:
    if os.path.exists(os.path.join(out, "alf_dataset.json")):
        return
    cmd = [sys.executable, "-m", "alf.bin.export_dataset", f"--out={out}",
           f"--collect_steps={steps}", f"--policy={policy}"] + source + list(extra)
    run(cmd, out + ".log")


def eval_policy(root_dir: str, episodes: int, seed: int = 12345, num_envs: int = 4) -> float:
    """Average greedy return of a run's newest checkpoint over ``episodes`` episodes of a
    freshly seeded env: every policy is scored on the same episodes (initial states)."""
    import alf
    from alf.dataset_tools.collect import _load_policy
    from alf.environments import create_environment
    from alf.experiment import EnvSpecs
    from alf.trainers.evaluator import evaluate
    from alf.trainers.trainer_config import TrainerConfig
    alf.config.parse_config(os.path.join(root_dir, "config.gin"))
    config = TrainerConfig()
    env = create_environment(num_parallel_environments=num_envs, seed=seed)
    try:
        algorithm, _, _ = _load_policy(root_dir, config, EnvSpecs.of(env))
        results = evaluate(algorithm, env, algorithm.data_transformer, episodes)
    finally:
        env.close()
    return float(np.mean([r for r, _ in results]))


def _complete_returns(paths: List[str]) -> np.ndarray:
    from alf.datasets.format import open_dataset
    out = []
    for path in paths:
        ds = open_dataset(path)
        out.append(ds.episode_returns()[ds.episodes()[:, 3] == 1])
    return np.concatenate(out)


def dataset_return(path: str) -> float:
    """Average return of the complete episodes of a dataset."""
    return float(np.mean(_complete_returns([path])))


def iql_reward_scale(paths: List[str]) -> List[str]:
    """IQL's locomotion reward normalisation (Kostrikov et al. 2021, appendix): rewards
    times ``1000 / (max - min)`` of the datasets' episode returns, as gin bindings."""
    returns = _complete_returns(paths)
    scale = 1000.0 / float(returns.max() - returns.min())
    return ["TrainerConfig.data_transformer_ctor=@RewardScaling",
            f"RewardScaling.scale={scale:.6g}"]


def pendulum(args) -> dict:
    root = os.path.abspath(args.root)
    data = os.path.join(root, "data")
    os.makedirs(data, exist_ok=True)
    sac = os.path.join(root, "sac_pendulum")
    train("sac_pendulum.gin", sac, ["TrainerConfig.save_replay_buffer=True"] + args.threads)
    expert, rand = os.path.join(data, "pendulum_expert"), os.path.join(data, "pendulum_random")
    collect(expert, 10000, "greedy", [f"--root_dir={sac}"], ["--num_envs=4", "--seed=1"])
    collect(rand, 10000, "random", ["--conf=sac_pendulum.gin"], ["--num_envs=4", "--seed=2"])
    mixed = f"['{expert}', '{rand}']"
    res = {"expert_dataset_return": dataset_return(expert),
           "random_dataset_return": dataset_return(rand)}
    res["expert_eval"] = eval_policy(sac, 20)
    for name, conf, ds in (("bc_expert", "bc_pendulum.gin", f"'{expert}'"),
                           ("bc_mixed", "bc_pendulum.gin", mixed),
                           ("iql_mixed", "iql_pendulum.gin", mixed)):
        res[name + "_train_log"] = train(conf, os.path.join(root, name),
                                         [f"TrainerConfig.offline_buffer_dir={ds}"] + args.threads)
        res[name] = eval_policy(os.path.join(root, name), 20)
    e = res["expert_eval"]
    print(f"\n| policy | return, same 20 episodes | expert / policy |\n|---|---|---|")
    print(f"| expert (SAC greedy) | {e:.1f} | 1.00 |")
    print(f"| (expert dataset: episode average) | {res['expert_dataset_return']:.1f} | |")
    print(f"| (random dataset: episode average) | {res['random_dataset_return']:.1f} | |")
    for k in ("bc_expert", "bc_mixed", "iql_mixed"):
        print(f"| {k} | {res[k]:.1f} | {e / res[k]:.2f} |")
    return res


def halfcheetah(args) -> dict:
    root = os.path.abspath(args.root)
    data = os.path.join(root, "data")
    os.makedirs(data, exist_ok=True)
    medium = os.path.join(data, "halfcheetah_medium")
    source = [f"--root_dir={os.path.abspath(args.sac_root)}"]
    if args.checkpoint is not None:
        source.append(f"--checkpoint={args.checkpoint}")
    collect(medium, 100000, "sample", source, ["--num_envs=4", "--seed=1"])
    res = {"medium_dataset_return": dataset_return(medium)}
    for name, conf in (("bc_hc", "bc_halfcheetah.gin"), ("iql_hc", "iql_halfcheetah.gin")):
        scale = iql_reward_scale([medium]) if name.startswith("iql") else []
        res[name + "_train_log"] = train(conf, os.path.join(root, name),
                                         [f"TrainerConfig.offline_buffer_dir='{medium}'"]
                                         + scale + args.threads)
        res[name] = eval_policy(os.path.join(root, name), 10)
    d = res["medium_dataset_return"]
    print(f"\n| policy | eval return | vs dataset |\n|---|---|---|")
    print(f"| medium dataset (SAC @ {args.checkpoint}) | {d:.1f} | 1.00 |")
    for k in ("bc_hc", "iql_hc"):
        print(f"| {k} | {res[k]:.1f} | {res[k] / d:.2f} |")
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", choices=["pendulum", "halfcheetah"])
    p.add_argument("--root", default="runs/offline")
    p.add_argument("--sac_root", help="halfcheetah: the SAC run the medium policy comes from")
    p.add_argument("--checkpoint", type=int, help="halfcheetah: its iteration to collect with")
    p.add_argument("--num_threads", type=int, default=None)
    args = p.parse_args()
    args.threads = ([f"TrainerConfig.num_threads={args.num_threads}"]
                    if args.num_threads else [])
    res = pendulum(args) if args.env == "pendulum" else halfcheetah(args)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"offline_{args.env}.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
