"""SB3 PPO on CartPole-v1 with rl-zoo's hyper-parameters (the peer for bench/ppo_cart_pole.py).

Prints one JSON line: seconds and env steps at which the 20-episode mean
training return first reached the target, and total wall-clock for the run.
Timing starts when ``learn()`` starts (model construction excluded, as for alf).
"""
import argparse
import json
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    def linear(v):
        return lambda progress_remaining: progress_remaining * v

    class Watch(BaseCallback):
        def __init__(self):
            super().__init__()
            self.start = None
            self.hit = None

        def _on_training_start(self):
            self.start = time.perf_counter()

        def _on_step(self):
            buf = self.model.ep_info_buffer
            if self.hit is None and len(buf) >= 20:
                mean = sum(e["r"] for e in list(buf)[-20:]) / 20
                if mean >= args.target:
                    self.hit = (time.perf_counter() - self.start, self.num_timesteps)
            return True

    env = make_vec_env("CartPole-v1", n_envs=8, seed=args.seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
                seed=args.seed, verbose=0, device="cpu", stats_window_size=20)
    cb = Watch()
    t0 = time.perf_counter()
    model.learn(args.steps, callback=cb)
    total = time.perf_counter() - t0
    print(json.dumps({"peer": "sb3", "seed": args.seed, "total_s": total, "steps": args.steps,
                      "hit_s": cb.hit[0] if cb.hit else None,
                      "hit_steps": cb.hit[1] if cb.hit else None}))


if __name__ == "__main__":
    main()
