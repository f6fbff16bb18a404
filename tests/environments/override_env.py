"""Pendulum whose action is overridden every third step, as a safety layer or a
scripted controller would: the env executes ``OVERRIDE`` instead of the agent's action
and reports it as ``info["executed_action"]``, for the
``TrainerConfig.overwrite_policy_output`` tests.

``gym.make("tests.environments.override_env:OverriddenPendulum-v0")`` (importable by
async env workers as well).
"""
import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv

#: the action the env executes on every third step of an episode
OVERRIDE = 1.25


class OverriddenPendulum(PendulumEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._steps = 0

    def reset(self, **kwargs):
        self._steps = 0
        return super().reset(**kwargs)

    def step(self, action):
        self._steps += 1
        if self._steps % 3 == 0:
            executed = np.array([OVERRIDE], dtype=np.float32)
            obs, reward, terminated, truncated, info = super().step(executed)
            return obs, reward, terminated, truncated, dict(info, executed_action=executed)
        return super().step(action)


gym.register("OverriddenPendulum-v0", entry_point=OverriddenPendulum, max_episode_steps=200)
