"""Small tasks with nested / multi-discrete action spaces, for the action-nest examples
and tests (``ppo_grid_multidiscrete.gin``, ``ppo_hybrid_action.gin``,
``sac_nested_box.gin``).

Import the module (``import alf.examples.action_nest_envs`` in gin, or the env id
``"alf.examples.action_nest_envs:GridMove-v0"``) to register the ids with gymnasium.

* ``GridMove-v0``: a 7x7 grid; the agent and a goal start in random cells. The action is
  ``MultiDiscrete([3, 3])``: a move ``-1/0/+1`` along x and, independently, along y (so
  the best action moves diagonally toward the goal). Reward: the decrease of the
  Manhattan distance to the goal each step (``+2`` at best) plus 1 on reaching it, which
  ends the episode; 20 steps truncate it. Observation: ``[dx, dy] / 6`` (goal minus
  agent), float32 in ``[-1, 1]``. A uniformly random policy scores 0.9 an episode on
  average, the optimal one 5.65 (1 + the start distance).
* ``HybridTarget-v0``: ``Dict(sign=Discrete(2), size=Box(0, 1, (1,)))`` actions. Each step
  shows a target ``t`` in ``[-1, 1]``; the action means ``(+1 if sign else -1) * size``
  and the reward is ``-|action - t|`` (0 at best); 10 steps an episode (truncated): a
  uniformly random policy scores -6.7 an episode, the optimal one 0. Observation: ``[t]``.
* ``NestedBoxTarget-v0``: ``Dict(a=Box(-1, 1, (2,)), b=Box(0, 2, (1,)))`` actions (two
  ``Box`` leaves with different bounds), one step an episode (terminated). The reward is
  minus the Euclidean distance of the action ``(a, b)`` to the fixed target
  ``a = (0.5, -0.25)``, ``b = 1.5`` (0 at best): a uniformly random policy scores -1.17 an
  episode. Observation: ``[1]`` (nothing to read: the task is the action nest).
"""
import gymnasium as gym
import numpy as np

GRID = 7
GRID_STEPS = 20
HYBRID_STEPS = 10


class GridMove(gym.Env):
    """A goal on a 7x7 grid reached by independent x and y moves (``MultiDiscrete([3, 3])``)."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 3])
        self._pos = np.zeros(2, np.int64)
        self._goal = np.zeros(2, np.int64)

    def _obs(self) -> np.ndarray:
        return ((self._goal - self._pos) / (GRID - 1)).astype(np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.integers(0, GRID, 2)
        self._goal = self.np_random.integers(0, GRID, 2)
        while np.array_equal(self._goal, self._pos):
            self._goal = self.np_random.integers(0, GRID, 2)
        return self._obs(), {}

    def step(self, action):
        before = int(np.abs(self._goal - self._pos).sum())
        move = np.asarray(action, np.int64).reshape(2) - 1
        self._pos = np.clip(self._pos + move, 0, GRID - 1)
        after = int(np.abs(self._goal - self._pos).sum())
        done = after == 0
        reward = float(before - after) + (1.0 if done else 0.0)
        return self._obs(), reward, done, False, {}


class HybridTarget(gym.Env):
    """Hit a target in ``[-1, 1]`` with a discrete sign and a continuous size (``Dict``)."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Dict({
            "sign": gym.spaces.Discrete(2),
            "size": gym.spaces.Box(0.0, 1.0, (1,), np.float32)})
        self._target = 0.0

    def _new_target(self) -> np.ndarray:
        self._target = float(self.np_random.uniform(-1.0, 1.0))
        return np.array([self._target], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._new_target(), {}

    def step(self, action):
        sign = 1.0 if int(np.asarray(action["sign"])) else -1.0
        size = float(np.clip(np.asarray(action["size"], np.float32).reshape(-1)[0], 0.0, 1.0))
        reward = -abs(sign * size - self._target)
        return self._new_target(), reward, False, False, {}


class NestedBoxTarget(gym.Env):
    """Hit a fixed target with an action nest of two ``Box`` leaves in one step (``Dict``)."""

    metadata = {"render_modes": []}
    TARGET = {"a": (0.5, -0.25), "b": (1.5,)}

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Dict({
            "a": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "b": gym.spaces.Box(0.0, 2.0, (1,), np.float32)})

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(1, np.float32), {}

    def step(self, action):
        error = np.concatenate([
            np.asarray(action[k], np.float32).reshape(-1) - np.asarray(t, np.float32)
            for k, t in self.TARGET.items()])
        reward = -float(np.sqrt(np.square(error).sum()))
        return np.ones(1, np.float32), reward, True, False, {}


gym.register("GridMove-v0", entry_point=GridMove, max_episode_steps=GRID_STEPS,
             disable_env_checker=True)
gym.register("HybridTarget-v0", entry_point=HybridTarget, max_episode_steps=HYBRID_STEPS,
             disable_env_checker=True)
gym.register("NestedBoxTarget-v0", entry_point=NestedBoxTarget, disable_env_checker=True)
