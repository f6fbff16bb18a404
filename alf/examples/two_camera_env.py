"""TwoCameraBandit: a dict observation with two cameras and a proprioception vector, where
the reward needs all three (issue 41: per-key observation encoders).

``gym.make("alf.examples.two_camera_env:TwoCameraBandit-v0")``. Each episode is one step.
The observation is ``{"left": uint8 [3, 12, 12], "right": uint8 [3, 12, 12],
"proprio": float32 [2]}``: each camera shows a lit 3x3 patch at a random place in its
top half (bit 0) or bottom half (bit 1) over dim noise, and ``proprio`` is ``(s, n)``,
``s`` = +-0.5 the third bit (sign) and ``n`` noise. The action (``Discrete(8)``) is
rewarded 1 when it equals ``4 * left_bit + 2 * right_bit + proprio_bit``, else 0.
A random policy gets 0.125; a policy that ignores any one of the three entries at
most 0.5; only one that reads both cameras and the vector reaches 1.
"""
import gymnasium as gym
import numpy as np

SIZE = 12
PATCH = 3


class TwoCameraBandit(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self):
        cam = gym.spaces.Box(0, 255, (3, SIZE, SIZE), np.uint8)
        self.observation_space = gym.spaces.Dict(
            {"left": cam, "right": cam,
             "proprio": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
        self.action_space = gym.spaces.Discrete(8)
        self._target = 0

    def _camera(self, bit: int) -> np.ndarray:
        img = self.np_random.integers(0, 40, (3, SIZE, SIZE)).astype(np.uint8)
        half = SIZE // 2
        row = self.np_random.integers(0, half - PATCH + 1) + bit * half
        col = self.np_random.integers(0, SIZE - PATCH + 1)
        img[:, row:row + PATCH, col:col + PATCH] = 255
        return img

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        bits = self.np_random.integers(0, 2, 3)
        self._target = int(4 * bits[0] + 2 * bits[1] + bits[2])
        proprio = np.array([bits[2] - 0.5, self.np_random.uniform(-1, 1)], np.float32)
        return {"left": self._camera(int(bits[0])), "right": self._camera(int(bits[1])),
                "proprio": proprio}, {}

    def step(self, action):
        reward = float(int(action) == self._target)
        obs, _ = self.reset()
        return obs, reward, True, False, {}


gym.register("TwoCameraBandit-v0", entry_point=TwoCameraBandit, max_episode_steps=1,
             disable_env_checker=True)
