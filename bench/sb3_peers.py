"""The Stable-Baselines3 (2.x) peers of alf's examples, built with the examples' settings
(bench/sb3_runs.py trains them). Each builder mirrors the gin values of the example as
they are now (SB3 cannot read a gin file); the comments name the gin binding each SB3
argument mirrors, and say where SB3 cannot match.

Common to all: SB3's ``learn(total_timesteps)`` is the gin's
``TrainerConfig.num_env_steps`` (bench/seed_plan.py reads it); a schedule of alf's
training progress (env steps / num_env_steps) is the same function of SB3's
``progress_remaining`` (``1 - num_timesteps / total_timesteps``); torch runs with one
thread (the gin's ``TrainerConfig.num_threads`` is a speed setting); SB3 counts env steps
like alf, except that alf also counts each autoreset step.
"""
from typing import Callable, Dict

import torch

Schedule = Callable[[float], float]


def linear(start: float, end: float = 0.0) -> Schedule:
    """``start`` annealed linearly to ``end`` over the run (alf's
    ``LinearSchedule(start, end)``; SB3 passes the remaining progress, 1 -> 0)."""
    return lambda progress_remaining: end + progress_remaining * (start - end)


def ppo_cart_pole(env, seed: int):
    """alf/examples/ppo_cart_pole.gin (rl-zoo's CartPole-v1 PPO); no mismatch: every
    setting below is SB3's or the gin's."""
    from stable_baselines3 import PPO
    return PPO(
        "MlpPolicy", env,  # pi/vf: separate 64x64 tanh MLPs, orthogonal init (SB3 default)
        # = Actor/ValueNetwork.fc_layer_params (64, 64), activation tanh, orthogonal init
        n_steps=32,  # TrainerConfig.unroll_length (x 8 envs: create_environment)
        batch_size=256,  # TrainerConfig.mini_batch_size
        n_epochs=20,  # TrainerConfig.num_updates_per_train_iter
        gamma=0.98, gae_lambda=0.8,  # PPOAlgorithm.gamma, .gae_lambda
        learning_rate=linear(1e-3),  # lr/LinearSchedule 1e-3 -> 0
        clip_range=linear(0.2),  # clip/LinearSchedule 0.2 -> 0
        ent_coef=0.0, vf_coef=0.5,  # PPOLoss.entropy_regularization, .td_loss_weight
        normalize_advantage=True,  # PPOLoss.normalize_advantages
        max_grad_norm=0.5,  # Adam.gradient_clipping; SB3's Adam eps is 1e-5 = Adam.eps
        seed=seed, device="cpu", verbose=0)


def ac_cart_pole(env, seed: int):
    """alf/examples/ac_cart_pole.gin with SB3's A2C; no mismatch (SB3's RMSprop is
    replaced by Adam with torch's eps 1e-8, alf's Adam default)."""
    from stable_baselines3 import A2C
    return A2C(
        "MlpPolicy", env,  # separate 64x64 tanh actor and critic, orthogonal init
        n_steps=16,  # TrainerConfig.unroll_length (x 8 envs); one gradient step each
        gamma=0.99, gae_lambda=0.95,  # ActorCriticLoss.gamma, .td_lambda (use_gae=True)
        learning_rate=linear(2e-3),  # LinearSchedule 2e-3 -> 0
        ent_coef=0.0, vf_coef=0.5,  # .entropy_regularization, .td_loss_weight
        normalize_advantage=True,  # ActorCriticLoss.normalize_advantages
        max_grad_norm=0.5,  # Adam.gradient_clipping
        use_rms_prop=False,  # alf.optimizers.Adam (eps default 1e-8):
        policy_kwargs=dict(optimizer_class=torch.optim.Adam, optimizer_kwargs=dict(eps=1e-8)),
        seed=seed, device="cpu", verbose=0)


def dqn_cart_pole(env, seed: int):
    """alf/examples/dqn_cart_pole.gin (rl-zoo's CartPole-v1 DQN with 3-step returns and an
    annealed lr). Mismatch: the gin's ``DqnAlgorithm.double_q = True``; SB3's DQN has no
    double Q (vanilla targets)."""
    from stable_baselines3 import DQN
    return DQN(
        "MlpPolicy", env,  # one env (create_environment.num_parallel_environments)
        policy_kwargs=dict(net_arch=[256, 256]),  # QNetwork (256, 256), ReLU, torch init
        learning_rate=linear(2.3e-3, 2.3e-4),  # lr/LinearSchedule 2.3e-3 -> 2.3e-4
        n_steps=3,  # DqnAlgorithm.n_step
        max_grad_norm=10.0,  # Adam.gradient_clipping
        batch_size=64,  # TrainerConfig.mini_batch_size
        buffer_size=100_000,  # TrainerConfig.replay_buffer_length
        learning_starts=1000,  # TrainerConfig.initial_collect_steps (random actions)
        train_freq=256,  # TrainerConfig.unroll_length: env steps between training
        gradient_steps=128,  # TrainerConfig.num_updates_per_train_iter
        # DqnAlgorithm.target_update_period = 128 gradient steps: rl-zoo's 10 counts env
        # steps, so SB3 re-syncs the target during each 256-step rollout: once per 128
        # gradient steps, as the gin does
        target_update_interval=10, tau=1.0,
        exploration_initial_eps=1.0, exploration_final_eps=0.04,  # LinearSchedule 1 -> 0.04
        exploration_fraction=0.08,  # epsilon/LinearSchedule.end_progress
        gamma=0.99,  # DqnAlgorithm.gamma; loss: Huber on both
        seed=seed, device="cpu", verbose=0)


def sac_pendulum(env, seed: int):
    """alf/examples/sac_pendulum.gin and its include sac_actor.gin (rl-zoo's Pendulum-v1
    SAC: SB3's defaults and lr 1e-3); no mismatch."""
    from stable_baselines3 import SAC
    return SAC(
        "MlpPolicy", env,
        # sac_actor.gin: actor and twin critics 256x256 ReLU on concat(obs, action), torch
        # init, state-dependent log-std clipped to [-20, 2], tanh squashing (SB3 default)
        policy_kwargs=dict(net_arch=[256, 256]),
        learning_rate=1e-3,  # alf.optimizers.Adam.lr of actor, critic and alpha
        buffer_size=1_000_000,  # TrainerConfig.replay_buffer_length
        learning_starts=100,  # TrainerConfig.initial_collect_steps (random actions)
        batch_size=256,  # TrainerConfig.mini_batch_size
        train_freq=1, gradient_steps=1,  # unroll_length 1, num_updates_per_train_iter 1
        tau=0.005, gamma=0.99,  # SacAlgorithm.target_update_tau, .gamma
        # SacAlgorithm defaults: initial alpha 1, target entropy -dim(A), twin critics
        ent_coef="auto", target_entropy="auto",
        seed=seed, device="cpu", verbose=0)


def ddpg_pendulum(env, seed: int):
    """alf/examples/ddpg_pendulum.gin with SB3's DDPG (TD3 with one critic, no policy
    delay, no target smoothing, as alf's DdpgAlgorithm defaults). Differs from rl-zoo
    as the gin does: 1,000 random steps first (rl-zoo: 10,000)."""
    import numpy as np
    from stable_baselines3 import DDPG
    from stable_baselines3.common.noise import NormalActionNoise
    dim = env.action_space.shape[0]
    return DDPG(
        "MlpPolicy", env,
        policy_kwargs=dict(net_arch=[400, 300]),  # Actor/CriticNetwork (400, 300), ReLU
        learning_rate=1e-3,  # alf.optimizers.Adam.lr of actor and critic
        buffer_size=200_000,  # TrainerConfig.replay_buffer_length
        learning_starts=1000,  # TrainerConfig.initial_collect_steps
        batch_size=256,  # TrainerConfig.mini_batch_size
        train_freq=1, gradient_steps=1,  # unroll_length 1, num_updates_per_train_iter 1
        tau=0.005, gamma=0.98,  # DdpgAlgorithm.target_update_tau, .gamma
        # DdpgAlgorithm.exploration_noise 0.1 of the action half-range: SB3 adds its noise
        # to the action scaled to [-1, 1]
        action_noise=NormalActionNoise(np.zeros(dim), 0.1 * np.ones(dim)),
        seed=seed, device="cpu", verbose=0)


PEERS: Dict[str, Callable] = {f.__name__: f for f in (
    ppo_cart_pole, ac_cart_pole, dqn_cart_pole, sac_pendulum, ddpg_pendulum)}
