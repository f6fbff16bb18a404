"""Sync-unroll overhead: alf's unroll of a tiny MLP policy vs. the raw vector env.

    python bench/unroll_overhead.py [--backend vector] [--steps 20000]

Measures, on 8 CartPole-v1 envs (same backend for every line):
  1. raw gymnasium vector env stepped with pre-sampled random actions (numpy);
  2. the alf environment (TimeStep conversion) stepped with random actions;
  3. alf's sync unroll (``Learner.collect``: transformer, ``rollout_step``
     of a PPO policy with a tiny MLP, experience stacking, metrics, replay write).
  4. the peer: stable-baselines3 PPO's ``collect_rollouts`` with the same MLP
     (its DummyVecEnv of 8 CartPole envs), unless ``--no_sb3``.
Reports env steps per second and the ratio unroll / raw (target >= 0.8).
"""
import argparse
import json
import os
import time

import numpy as np
import torch


def rate(fn, n: int, batch: int) -> float:
    for _ in range(min(200, n // 10)):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return n * batch / (time.perf_counter() - t0)


def _sb3_rollout_rate(num_envs: int, hidden: tuple, iterations: int) -> float:
    """SB3 PPO's ``collect_rollouts`` (policy + DummyVecEnv + rollout buffer) on the same task."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    env = make_vec_env("CartPole-v1", n_envs=num_envs, seed=0)
    model = PPO("MlpPolicy", env, n_steps=100, batch_size=100 * num_envs,
                policy_kwargs=dict(net_arch=list(hidden)), device="cpu", verbose=0)
    _, callback = model._setup_learn(10 ** 9, None)
    callback.on_training_start(locals(), globals())

    def collect():
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=100)

    return rate(collect, iterations, num_envs * 100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="vector", choices=["vector", "sync", "async"])
    p.add_argument("--steps", type=int, default=20000, help="batched steps per measurement")
    p.add_argument("--hidden", type=int, nargs="*", default=[32], help="MLP hidden sizes")
    p.add_argument("--num_envs", type=int, default=8)
    p.add_argument("--no_sb3", action="store_true", help="skip the stable-baselines3 peer line")
    args = p.parse_args()
    torch.set_num_threads(1)
    import gymnasium as gym
    import alf
    from alf import config as alf_config
    from alf.environments import create_environment
    from alf.trainers.learner import Learner
    from alf.trainers.trainer_config import TrainerConfig
    from alf.trainers.training_settings import TrainingSettings
    from alf.algorithms.ppo_algorithm import PPOAlgorithm
    from alf.utils.run_context import RunContext

    B = args.num_envs
    mode = {"vector": "vector_entry_point", "sync": "sync", "async": "async"}[args.backend]
    genv = gym.make_vec("CartPole-v1", num_envs=B, vectorization_mode=mode)
    genv.reset(seed=0)
    actions = np.random.randint(0, 2, size=(4096, B))
    i = [0]

    def raw_step():
        genv.step(actions[i[0] & 4095])
        i[0] += 1

    raw = rate(raw_step, args.steps, B)
    genv.close()

    env = create_environment("CartPole-v1", num_parallel_environments=B, backend=args.backend, seed=0)
    env.reset()
    spec = env.action_spec()
    acts = [spec.sample((B,)) for _ in range(256)]
    j = [0]

    def alf_env_step():
        env.step(acts[j[0] & 255])
        j[0] += 1

    alf_env = rate(alf_env_step, args.steps, B)

    hidden = tuple(args.hidden)
    alf_config.parse_config(config_text=(
        "TrainerConfig.algorithm_ctor = @PPOAlgorithm\nTrainerConfig.num_iterations = 1\n"
        "TrainerConfig.unroll_length = 100\nTrainerConfig.replay_buffer_length = 101\n"
        f"ActorDistributionNetwork.fc_layer_params = {hidden}\n"
        f"ValueNetwork.fc_layer_params = {hidden}\n"))
    settings = TrainingSettings.from_config(TrainerConfig())
    alg = PPOAlgorithm(env.observation_spec(), env.action_spec(), context=RunContext())
    learner = Learner.for_env(alg, env, settings)
    rb = learner.replay_buffer

    def unroll():
        with torch.no_grad():
            learner.collect(100)
        rb.clear(keep_last=True)

    unroll_rate = rate(unroll, max(10, args.steps // 100), B * 100)

    # The same unroll with a policy that costs nothing (uniform random actions):
    # what the unroller itself (TimeStep plumbing, experience stacking, metrics,
    # replay write) costs on top of the env.
    from alf.algorithms.rl_algorithm import RLAlgorithm
    from alf.data_structures import AlgStep

    presampled = [env.action_spec().sample((B,)) for _ in range(64)]

    class RandomPolicy(RLAlgorithm):
        """Returns pre-sampled random actions: costs nothing per step."""
        k = 0

        def rollout_step(self, time_step, state):
            RandomPolicy.k += 1
            return AlgStep(output=presampled[RandomPolicy.k & 63], state=state)

    rnd = RandomPolicy(env.observation_spec(), env.action_spec(), context=RunContext())
    rnd_learner = Learner.for_env(rnd, env, settings)

    def unroll_random():
        with torch.no_grad():
            rnd_learner.collect(100)
        rnd_learner.replay_buffer.clear(keep_last=True)

    random_rate = rate(unroll_random, max(10, args.steps // 100), B * 100)
    with torch.no_grad():
        ts = env.reset()
        state = alg.get_initial_rollout_state(B)
        policy_us = 1e6 / rate(lambda: alg.rollout_step(ts, state), 2000, 1)
    env.close()
    sb3_rate = _sb3_rollout_rate(B, hidden, max(10, args.steps // 100)) if not args.no_sb3 else None
    result = {"backend": args.backend, "num_envs": B, "hidden": list(hidden),
              "raw_gym_steps_per_s": raw, "alf_env_steps_per_s": alf_env,
              "alf_unroll_steps_per_s": unroll_rate, "unroll_over_raw": unroll_rate / raw,
              "alf_unroll_random_policy_steps_per_s": random_rate,
              "random_policy_unroll_over_raw": random_rate / raw,
              "policy_rollout_step_us": policy_us,
              "sb3_collect_rollouts_steps_per_s": sb3_rate,
              "unroll_over_alf_env": unroll_rate / alf_env}
    print(f"backend={args.backend} envs={B} policy MLP {hidden}")
    print(f"  raw gymnasium vector env, random actions : {raw:12,.0f} env steps/s")
    print(f"  alf env (TimeStep), random actions       : {alf_env:12,.0f} env steps/s")
    print(f"  alf sync unroll, zero-cost random policy : {random_rate:12,.0f} env steps/s"
          f"   ({random_rate / raw:.2f} of raw)")
    print(f"  alf sync unroll, PPO policy              : {unroll_rate:12,.0f} env steps/s")
    print(f"  (PPO rollout_step alone: {policy_us:.0f} us per batched step)")
    if sb3_rate:
        print(f"  peer: SB3 PPO collect_rollouts, same MLP  : {sb3_rate:12,.0f} env steps/s"
              f"   (alf unroll / SB3 = {unroll_rate / sb3_rate:.2f})")
    print(f"  unroll / raw = {unroll_rate / raw:.2f}   unroll / alf env = {unroll_rate / alf_env:.2f}")
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results",
                           f"unroll_overhead_{args.backend}.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
