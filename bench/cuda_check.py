"""Check the CUDA path: PPO / LSTM-PPO / A2C train on CartPole with the model on the GPU.

    python bench/cuda_check.py [--device cuda] [--iterations 150]

Builds each example through the Trainer (envs on CPU, algorithm, states and replay
buffer on the device), runs ``Learner.train_iter`` directly (no TensorBoard needed), and
prints where the parameters/buffer live, env steps per second and the average
training return at the end.
"""
import argparse
import tempfile
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--iterations", type=int, default=150)
    args = p.parse_args()
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    for conf, iters in [("ppo_cart_pole.gin", args.iterations), ("ppo_lstm_cart_pole.gin", 40),
                        ("ac_cart_pole.gin", args.iterations * 4)]:
        alf_config.parse_config(conf, [f"TrainerConfig.device='{args.device}'",
                                       "TrainerConfig.evaluate=False"])
        trainer = Trainer(TrainerConfig(), tempfile.mkdtemp(), quiet=True)
        alg, learner = trainer.algorithm, trainer.learner
        t0 = time.perf_counter()
        for _ in range(iters):
            trainer.context.iteration += 1
            learner.train_iter()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        rb = learner.replay_buffer
        print(f"{conf}: params on {alg.device}, replay buffer on "
              f"{rb.device if rb is not None else '-'}; {trainer.context.env_steps:,} env steps in "
              f"{dt:.1f} s ({trainer.context.env_steps / dt:,.0f}/s); average return "
              f"{learner.metrics.average_return():.1f}", flush=True)
        trainer.close()


if __name__ == "__main__":
    main()
