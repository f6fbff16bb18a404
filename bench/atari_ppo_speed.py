"""Training throughput of PPO on Atari Breakout: alf vs stable-baselines3, same run.

    python bench/atari_ppo_speed.py                   # 1 warm-up + 4 timed iterations each
    python bench/atari_ppo_speed.py --iters 8 --repeats 2
    python bench/atari_ppo_speed.py --precisions fp32 bf16 bf16-train --no-sb3   # mixed precision

Both sides use the same settings: 8 Breakout envs with the standard Atari
preprocessing (no-op reset, frame skip 4 with max-pool, 84x84 grey, 4 stacked
frames, fire on reset, life loss as a value cut-off, rewards clipped to +-1),
the Nature CNN shared by the policy and value heads, 128-step unrolls, 4
epochs of 256-sample mini-batches (1024 samples per iteration), Adam 2.5e-4,
torch with ``--threads`` intra-op threads.

- alf: ``ppo_atari.gin`` as shipped (ale-py's C++ ``AtariVectorEnv`` backend).
- ``--precisions``: alf once per entry, side by side: ``fp32`` (the default),
  ``bf16`` (``TrainerConfig.train_precision`` and ``act_precision`` both ``"bf16"``),
  ``bf16-train`` (training in bf16, acting in fp32), ``bf16-act`` (the reverse).
- SB3: ``make_atari_env("BreakoutNoFrameskip-v4", n_envs=8)`` +
  ``VecFrameStack(4)`` + ``PPO("CnnPolicy", n_steps=128, n_epochs=4,
  batch_size=256)``, SB3's documented Atari recipe (rl-zoo ``ppo.yml``).

The timed window starts after the first full iteration (rollout + training),
so start-up and first-call costs are excluded. Reported: agent steps/s and
frames/s (= 4 x agent steps, the frame skip) over whole iterations, i.e.
"training frames per second" including the unroll. Writes
``bench/results/atari_ppo_speed.json``.
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

STEPS_PER_ITER = 8 * 128


#: --precisions entry -> (train_precision, act_precision)
PRECISIONS = {"fp32": ("fp32", "fp32"), "bf16": ("bf16", "bf16"),
              "bf16-train": ("bf16", "fp32"), "bf16-act": ("fp32", "bf16")}


def run_alf(iters: int, threads: int, precision: str = "fp32") -> float:
    """Run ``1 + iters`` PPO iterations; return agent steps/s over the last ``iters``."""
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    root = tempfile.mkdtemp(prefix="alf_atari_speed_")
    params = [f"TrainerConfig.num_iterations={1 + iters}", "TrainerConfig.num_env_steps=0",
              f"TrainerConfig.num_threads={threads}", "TrainerConfig.evaluate=False",
              "TrainerConfig.summary_interval=100000000",
              "TrainerConfig.checkpoint_interval=100000000", "TrainerConfig.random_seed=0"]
    train, act = PRECISIONS[precision]
    params += [f'TrainerConfig.train_precision="{train}"', f'TrainerConfig.act_precision="{act}"']
    alf_config.parse_config(conf_file="ppo_atari.gin", conf_params=params)
    trainer = Trainer(TrainerConfig(), root, quiet=True)
    learner = trainer.learner
    original = learner.train_iter
    stamps = []

    def timed_train_iter():
        stamps.append(time.perf_counter())
        return original()

    learner.train_iter = timed_train_iter
    trainer.run()
    end = time.perf_counter()
    steps = trainer.context.env_steps
    assert steps == (1 + iters) * STEPS_PER_ITER, steps
    return iters * STEPS_PER_ITER / (end - stamps[1])


def run_sb3(iters: int, threads: int) -> float:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    import ale_py
    import gymnasium as gym
    gym.register_envs(ale_py)
    torch.set_num_threads(threads)
    env = VecFrameStack(make_atari_env("BreakoutNoFrameskip-v4", n_envs=8, seed=0), n_stack=4)
    model = PPO("CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4,
                clip_range=0.1, ent_coef=0.01, vf_coef=0.5, seed=0, verbose=0, device="cpu")

    class Clock(BaseCallback):
        def __init__(self):
            super().__init__()
            self.starts = []

        def _on_rollout_start(self) -> None:
            self.starts.append(time.perf_counter())

        def _on_step(self) -> bool:
            return True

    clock = Clock()
    model.learn(total_timesteps=(1 + iters) * STEPS_PER_ITER, callback=clock)
    end = time.perf_counter()
    env.close()
    return iters * STEPS_PER_ITER / (end - clock.starts[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=4, help="timed iterations (1024 agent steps each)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--precisions", nargs="+", default=["fp32"], choices=sorted(PRECISIONS),
                   help="alf arms, one per mixed-precision setting")
    p.add_argument("--no-sb3", action="store_true", help="alf arms only")
    args = p.parse_args()
    arms = [(f"alf-{prec}" if args.precisions != ["fp32"] else "alf",
             lambda i, t, prec=prec: run_alf(i, t, prec)) for prec in args.precisions]
    if not args.no_sb3:
        arms.append(("sb3", run_sb3))
    rates = {name: [] for name, _ in arms}
    for r in range(args.repeats):
        for name, fn in (arms if r % 2 == 0 else arms[::-1]):  # alternate the order
            rate = fn(args.iters, args.threads)
            rates[name].append(rate)
            print(f"  {name:15s} PPO Breakout: {rate:7.1f} agent steps/s = {4 * rate:7.1f} "
                  f"frames/s", flush=True)
    med = {name: statistics.median(v) for name, v in rates.items()}
    first = arms[0][0]
    print("PPO Breakout (8 envs, Nature CNN, 128-step unroll, 4 epochs), median agent steps/s: "
          + ", ".join(f"{n} {v:.1f} ({v / med[first]:.2f}x {first})" for n, v in med.items()))
    summary = {"rates": rates, "median": med, "args": vars(args)}
    if "sb3" in med:
        print(f"{first}/SB3 = {med[first] / med['sb3']:.2f}x")
        summary.update(alf=rates[first], sb3=rates["sb3"], ratio=med[first] / med["sb3"])
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "atari_ppo_speed.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
