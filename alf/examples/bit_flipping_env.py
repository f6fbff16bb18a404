"""BitFlipping: the goal-conditioned task of the HER paper (Andrychowicz et al. 2017, 3.1).

``gym.make("alf.examples.bit_flipping_env:BitFlipping-v0", n_bits=15)``. The state is
``n`` bits and each episode asks for a random target of ``n`` bits (never the start
state). Action ``i`` (``Discrete(n)``) flips bit ``i``. The reward is 0 on the step
that reaches the target (which ends the episode, ``terminated``) and -1 on every
other step; an episode is cut (``truncated``) after ``n`` steps, enough to reach any
target. The observation is gymnasium-robotics' goal dict: ``observation`` (the bits),
``achieved_goal`` (the bits: what the state achieves) and ``desired_goal`` (the
target), each float32 ``[n]`` of 0/1. ``compute_reward(achieved_goal, desired_goal,
info)`` is the reward as a function of the goals, for a batch (``[..., n]``), as
gymnasium-robotics' goal envs define it; ``info["is_success"]`` says whether the step
reached the target.

A random policy reaches a target ``d`` bits away with probability about ``d! / n^d``
within ``n`` steps, so a learner that only sees its own goals gets almost no signal
for ``n >= 15``: the case where relabeling with hindsight goals matters.
"""
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np


class BitFlippingEnv(gym.Env):
    """``n_bits`` bits to flip into a random target; see the module docstring."""

    metadata = {"render_modes": []}

    def __init__(self, n_bits: int = 15):
        if n_bits < 1:
            raise ValueError(f"BitFlippingEnv: n_bits must be >= 1, got {n_bits}")
        self.n_bits = int(n_bits)
        bits = gym.spaces.Box(0.0, 1.0, (self.n_bits,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": bits, "achieved_goal": bits, "desired_goal": bits})
        self.action_space = gym.spaces.Discrete(self.n_bits)
        self._state = np.zeros(self.n_bits, np.float32)
        self._goal = np.ones(self.n_bits, np.float32)
        self._t = 0

    def _obs(self) -> Dict[str, np.ndarray]:
        return {"observation": self._state.copy(), "achieved_goal": self._state.copy(),
                "desired_goal": self._goal.copy()}

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._state = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        self._goal = self._state
        while np.array_equal(self._goal, self._state):
            self._goal = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        self._t = 0
        return self._obs(), {}

    def step(self, action) -> Tuple[Dict[str, np.ndarray], float, bool, bool, Dict[str, Any]]:
        self._state = self._state.copy()
        self._state[int(action)] = 1.0 - self._state[int(action)]
        self._t += 1
        reward = float(self.compute_reward(self._state, self._goal, {}))
        success = reward == 0.0
        return self._obs(), reward, success, (not success) and self._t >= self.n_bits, \
            {"is_success": success}

    @staticmethod
    def compute_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray,
                       info: Any) -> np.ndarray:
        """0 where all bits match, else -1, over the last axis (``[..., n] -> [...]``)."""
        differs = np.any(np.asarray(achieved_goal) != np.asarray(desired_goal), axis=-1)
        return -differs.astype(np.float32)


gym.register("BitFlipping-v0", entry_point=BitFlippingEnv, disable_env_checker=True)
