"""A corridor with a goal at each end and one reward column per goal: an env's own
vector reward (``reward_space`` ``Box([2])``, MO-Gymnasium's convention), for the
vector-reward tests.

``gym.make("tests.environments.two_goal_env:TwoGoalCorridor-v0")`` (importable by async
env workers as well). The agent starts in the middle of 7 cells; action 1 steps right,
0 steps left. Reaching the right end gives reward ``[1, 0]``, the left end ``[0, 1]``,
and ends the episode; 20 steps without either truncate it. The observation is the
position in [-1, 1].
"""
import gymnasium as gym
import numpy as np

HALF_WIDTH = 3


class TwoGoalCorridor(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, reward_shape=(2,)):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.reward_space = gym.spaces.Box(0.0, 1.0, reward_shape, np.float32)
        self._pos = 0

    def _obs(self):
        return np.array([self._pos / HALF_WIDTH], dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = 0
        return self._obs(), {}

    def step(self, action):
        self._pos += 1 if int(action) == 1 else -1
        reward = np.array([self._pos >= HALF_WIDTH, self._pos <= -HALF_WIDTH], np.float32)
        return self._obs(), reward, bool(abs(self._pos) >= HALF_WIDTH), False, {}


gym.register("TwoGoalCorridor-v0", entry_point=TwoGoalCorridor, max_episode_steps=20,
             disable_env_checker=True)
