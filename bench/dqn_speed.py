"""DQN on CartPole-v1, alf vs stable-baselines3 in one run: env steps/s and learning result.

    python bench/dqn_speed.py                         # 50k env steps, 3 repeats of each run
    python bench/dqn_speed.py --runs alf,sb3 --repeats 5

Both sides use rl-zoo's DQN CartPole-v1 hyper-parameters (rl-baselines3-zoo
``hyperparams/dqn.yml``): one env, 256x256 ReLU Q-network, Adam lr 2.3e-3, batch
64, 100k buffer, 1,000 random steps first, every 256 env steps 128 gradient
steps, gamma 0.99, Huber loss, gradient norm clipped at 10, epsilon 1 -> 0.04
over the first 16% of 50k env steps (8k), one torch thread. SB3 runs
``DQN("MlpPolicy")`` with the rl-zoo values. alf runs the shipped
``dqn_cart_pole.gin`` with the run length, the thread count and the seed overridden and
rl-zoo's values put back where the gin departs from them (:data:`RL_ZOO`: 1-step
returns, a constant lr, epsilon over 16% of the run) (hard target copy once per 128
gradient steps: SB3's ``target_update_interval=10`` env steps re-syncs once per rollout
too, see the gin file), twice:

- ``alf``: as shipped, with double Q (one more forward pass per update than SB3);
- ``alf-vanilla``: ``DqnAlgorithm.double_q=False``, SB3's algorithm exactly.

Timed: the whole ``learn()`` / ``Trainer.run()`` (random warm-up, rollouts,
updates, alf's summaries and checkpoints included; construction excluded), so
env steps/s = ``--steps`` / seconds; env steps per CPU second (this process's
CPU time) is printed too, as it moves less with other jobs on a shared machine.
Learning: the average training return of the last 10 episodes when the run
ends (both sides keep a 10-episode window). Each repeat runs every side once,
rotating which goes first, with seed = repeat index, after one untimed short
warm-up run of each side; the figures are medians over repeats. Prints every
run, the medians and the ratios to SB3; writes ``bench/results/dqn_speed.json``.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

WINDOW = 10  # episodes in the reported average return (alf: metric_buffer_size)


# dqn_cart_pole.gin's departures from rl-zoo (3-step returns and an annealed lr, issue 21)
# undone, so both sides run the same hyper-parameters
RL_ZOO = ["DqnAlgorithm.n_step=1", "alf.optimizers.Adam.lr=2.3e-3",
          "epsilon/LinearSchedule.end_progress=0.16"]

# alf configurations: dqn_cart_pole.gin with rl-zoo's values, and with SB3's algorithm
# (no double Q)
ALF_VARIANTS = {
    "alf": [],
    "alf-vanilla": ["DqnAlgorithm.double_q=False"],
}


def run_alf(steps: int, seed: int, threads: int, extra: List[str]) -> Tuple[float, float, float]:
    """Train ``dqn_cart_pole.gin`` (+ ``extra`` bindings) for ``steps`` env steps; return
    (env steps/s, env steps per CPU second, final return)."""
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    root = tempfile.mkdtemp(prefix="alf_dqn_speed_")
    params = [f"TrainerConfig.num_env_steps={steps}",
              f"TrainerConfig.num_threads={threads}",
              f"TrainerConfig.random_seed={seed}",
              f"TrainerConfig.metric_buffer_size={WINDOW}",
              "TrainerConfig.evaluate=False"] + RL_ZOO + list(extra)
    alf_config.parse_config(conf_file="dqn_cart_pole.gin", conf_params=params)
    trainer = Trainer(TrainerConfig(), root, quiet=True)
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.run()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    steps = trainer.context.env_steps
    result = steps / seconds, steps / cpu, float(trainer.learner.metrics.average_return())
    shutil.rmtree(root, ignore_errors=True)
    return result


def run_sb3(steps: int, seed: int, threads: int, extra: List[str]) -> Tuple[float, float, float]:
    """SB3 DQN with rl-zoo's CartPole-v1 settings; return (env steps/s, env steps per CPU
    second, final return)."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(threads)
    env = gym.make("CartPole-v1")
    model = DQN("MlpPolicy", env, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256,
                gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                policy_kwargs=dict(net_arch=[256, 256]), stats_window_size=WINDOW, seed=seed,
                verbose=0, device="cpu")
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    episodes = list(model.ep_info_buffer)[-WINDOW:]
    ret = sum(e["r"] for e in episodes) / max(1, len(episodes))
    env.close()
    return model.num_timesteps / seconds, model.num_timesteps / cpu, float(ret)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50_000, help="env steps per run (rl-zoo: 50k)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads, both sides")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup-steps", type=int, default=1500,
                   help="an untimed run of each side first (imports, first calls)")
    p.add_argument("--runs", default="alf,alf-vanilla,sb3",
                   help="comma-separated: " + ", ".join(list(ALF_VARIANTS) + ["sb3"]))
    p.add_argument("--alf-param", action="append", default=[],
                   help="extra gin binding for every alf run (repeatable)")
    args = p.parse_args()
    names = [n for n in args.runs.split(",") if n]
    for n in names:
        if n != "sb3" and n not in ALF_VARIANTS:
            p.error(f"unknown run {n!r}; choose from {', '.join(list(ALF_VARIANTS) + ['sb3'])}")
    runs = {n: [] for n in names}
    for name in names:  # untimed warm-up: imports and first-call costs out of the figures
        if name == "sb3":
            run_sb3(args.warmup_steps, 0, args.threads, [])
        else:
            run_alf(args.warmup_steps, 0, args.threads, ALF_VARIANTS[name] + args.alf_param)
    for r in range(args.repeats):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate who goes first
        for name in order:
            if name == "sb3":
                rate, cpu_rate, ret = run_sb3(args.steps, r, args.threads, [])
            else:
                rate, cpu_rate, ret = run_alf(args.steps, r, args.threads,
                                              ALF_VARIANTS[name] + args.alf_param)
            runs[name].append({"seed": r, "env_steps_per_s": rate,
                               "env_steps_per_cpu_s": cpu_rate, "final_return": ret})
            print(f"  repeat {r} {name:11s}: {rate:7.1f} env steps/s ({args.steps / rate:5.1f} s; "
                  f"{cpu_rate:7.1f} per CPU second), final return {ret:6.1f}", flush=True)
    med = {k: {f: statistics.median(x[f] for x in v)
               for f in ("env_steps_per_s", "env_steps_per_cpu_s", "final_return")}
           for k, v in runs.items()}
    for k, m in med.items():
        print(f"{k:11s}: median {m['env_steps_per_s']:7.1f} env steps/s "
              f"({m['env_steps_per_cpu_s']:7.1f} per CPU second), median final return "
              f"{m['final_return']:6.1f} (returns {[round(x['final_return'], 1) for x in runs[k]]})")
    result = {"steps": args.steps, "threads": args.threads, "alf_param": args.alf_param,
              "runs": runs, "ratios": {}, "cpu_ratios": {}}
    if "sb3" in med:
        for k in med:
            if k != "sb3":
                ratio = med[k]["env_steps_per_s"] / med["sb3"]["env_steps_per_s"]
                cpu_ratio = med[k]["env_steps_per_cpu_s"] / med["sb3"]["env_steps_per_cpu_s"]
                result["ratios"][k], result["cpu_ratios"][k] = ratio, cpu_ratio
                print(f"DQN CartPole-v1 {args.steps:,} env steps: {k}/SB3 = {ratio:.2f}x "
                      f"(per CPU second: {cpu_ratio:.2f}x)")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "dqn_speed.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
