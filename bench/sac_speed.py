"""Env steps per second *during learning*: alf SAC/TD3 vs stable-baselines3, same run.

    python bench/sac_speed.py                       # SAC, HalfCheetah-v5, 3000 learning steps
    python bench/sac_speed.py --algo td3 --learn-steps 5000

Both sides: one HalfCheetah-v5 env, 256x256 ReLU actor and twin critics,
batch 256, one gradient step per env step, ``--warmup`` random steps first (not
timed), torch with ``--threads`` intra-op threads. The timed window is the
``--learn-steps`` env steps after the warm-up, each with its update. alf runs
first, then SB3; the order is alternated with ``--repeats 2``.
Prints both rates and alf/SB3; writes ``bench/results/<algo>_speed.json``.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CONF = {"sac": "sac_halfcheetah.gin", "td3": "td3_halfcheetah.gin"}


def run_alf(algo: str, env_name: str, warmup: int, learn_steps: int, threads: int) -> float:
    """Train alf for warmup + learn_steps env steps; return env steps/s after the warm-up."""
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    root = tempfile.mkdtemp(prefix=f"alf_{algo}_speed_")
    params = [f"create_environment.env_name='{env_name}'",
              f"TrainerConfig.num_env_steps={warmup + learn_steps}",
              f"TrainerConfig.initial_collect_steps={warmup}",
              f"TrainerConfig.num_threads={threads}",
              "TrainerConfig.evaluate=False", "TrainerConfig.summary_interval=100000000",
              "TrainerConfig.checkpoint_interval=100000000", "TrainerConfig.random_seed=0"]
    alf_config.parse_config(conf_file=CONF[algo], conf_params=params)
    trainer = Trainer(TrainerConfig(), root, quiet=True)
    stamps = {}
    learner = trainer.learner
    original = learner.train_iter

    def timed_train_iter():
        if trainer.context.env_steps == warmup and "start" not in stamps:
            stamps["start"] = time.perf_counter()
        return original()

    learner.train_iter = timed_train_iter
    trainer.run()
    return learn_steps / (time.perf_counter() - stamps["start"])


def run_sb3(algo: str, env_name: str, warmup: int, learn_steps: int, threads: int) -> float:
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise

    torch.set_num_threads(threads)
    env = gym.make(env_name)
    kwargs = dict(batch_size=256, learning_starts=warmup, train_freq=1, gradient_steps=1,
                  policy_kwargs=dict(net_arch=[256, 256]), buffer_size=1_000_000, seed=0,
                  verbose=0, device="cpu")
    if algo == "sac":
        model = SAC("MlpPolicy", env, learning_rate=3e-4, **kwargs)
    else:
        dim = env.action_space.shape[0]
        model = TD3("MlpPolicy", env, learning_rate=3e-4,
                    action_noise=NormalActionNoise(np.zeros(dim), 0.1 * np.ones(dim)), **kwargs)

    class Clock(BaseCallback):
        def __init__(self):
            super().__init__()
            self.start = None

        def _on_step(self) -> bool:
            if self.num_timesteps == warmup and self.start is None:
                self.start = time.perf_counter()
            return True

    clock = Clock()
    model.learn(total_timesteps=warmup + learn_steps, callback=clock)
    return learn_steps / (time.perf_counter() - clock.start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", choices=sorted(CONF), default="sac")
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--learn-steps", type=int, default=3000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    alf_rates, sb3_rates = [], []
    for r in range(args.repeats):
        order = [("alf", run_alf), ("sb3", run_sb3)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            rate = fn(args.algo, args.env, args.warmup, args.learn_steps, args.threads)
            (alf_rates if name == "alf" else sb3_rates).append(rate)
            print(f"  {name:4s} {args.algo} {args.env}: {rate:7.1f} env steps/s during learning",
                  flush=True)
    a, s = statistics.median(alf_rates), statistics.median(sb3_rates)
    print(f"{args.algo.upper()} {args.env}: alf {a:.1f} env steps/s, SB3 {s:.1f} -> alf/SB3 = "
          f"{a / s:.2f}x")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"{args.algo}_speed.json"), "w") as f:
        json.dump({"algo": args.algo, "env": args.env, "alf": alf_rates, "sb3": sb3_rates,
                   "ratio": a / s, "args": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
