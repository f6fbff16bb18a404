"""Check the CUDA path: PPO / LSTM-PPO / A2C train on CartPole with the model on the GPU.

    python bench/cuda_check.py [--device cuda] [--iterations 150] [--precision bf16]

Builds each example through the Trainer (envs on CPU, algorithm, states and replay
buffer on the device), runs ``Learner.train_iter`` directly (no TensorBoard needed), and
prints where the parameters/buffer live, env steps per second and the average
training return at the end. ``--precision bf16`` trains and acts in bf16
(``TrainerConfig.train_precision`` / ``act_precision``) and also checks, with forward
hooks, that every network call ran under a bf16 autocast on the device and that the
parameters and optimizer state stayed fp32.
"""
import argparse
import tempfile
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"))
    args = p.parse_args()
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    for conf, iters in [("ppo_cart_pole.gin", args.iterations), ("ppo_lstm_cart_pole.gin", 40),
                        ("ac_cart_pole.gin", args.iterations * 4)]:
        alf_config.parse_config(conf, [f"TrainerConfig.device='{args.device}'",
                                       "TrainerConfig.evaluate=False",
                                       f"TrainerConfig.train_precision='{args.precision}'",
                                       f"TrainerConfig.act_precision='{args.precision}'"])
        trainer = Trainer(TrainerConfig(), tempfile.mkdtemp(), quiet=True)
        alg, learner = trainer.algorithm, trainer.learner
        device_type = torch.device(args.device).type
        autocast_seen = set()
        for m in alg.modules():
            m.register_forward_hook(lambda *_: autocast_seen.add(
                torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type)
                else torch.float32))
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
              f"{learner.metrics.average_return():.1f}; computed in "
              f"{sorted(str(d) for d in autocast_seen)}", flush=True)
        fp32 = all(p.dtype == torch.float32 for p in alg.parameters()) and all(
            v.dtype == torch.float32 for o in alg.optimizers() for st in o.state.values()
            for v in st.values() if torch.is_tensor(v) and v.is_floating_point() and v.ndim)
        if not fp32 or (args.precision == "bf16" and autocast_seen != {torch.bfloat16}):
            raise SystemExit(f"{conf}: precision check failed (fp32 state: {fp32}, "
                             f"computed in {autocast_seen})")
        trainer.close()


if __name__ == "__main__":
    main()
