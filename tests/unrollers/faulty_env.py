"""CartPole with an injected fault, for the async fault tests.

``gym.make("tests.unrollers.faulty_env:FaultyCartPole-v0", fault=..., at_step=...,
marker=...)``: at its ``at_step``-th step the env raises (``fault="raise"``) or hangs
(``fault="hang"``), once per test: the first env to do so creates the ``marker``
file, so the envs of a restarted worker run normally.
"""
import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class FaultyCartPole(CartPoleEnv):
    def __init__(self, fault: str = "none", at_step: int = 50, marker: str = "", **kwargs):
        super().__init__(**kwargs)
        self._fault, self._at_step, self._marker = fault, int(at_step), marker
        self._steps = 0

    def step(self, action):
        self._steps += 1
        if (self._fault != "none" and self._steps == self._at_step and self._marker
                and not os.path.exists(self._marker)):
            with open(self._marker, "w") as f:
                f.write(str(os.getpid()))
            if self._fault == "raise":
                raise RuntimeError("injected fault")
            if self._fault == "hang":
                time.sleep(3600)
        return super().step(action)


gym.register("FaultyCartPole-v0", entry_point=FaultyCartPole, max_episode_steps=500)
