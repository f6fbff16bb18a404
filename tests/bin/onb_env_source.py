"""Source of ``onb_env.py``, the user module the env-checker CLI tests write next to
their gin file (``import onb_env`` there registers ``OnbBad-v0`` and ``OnbDict-v0``).

``OnbBad-v0`` takes ``mistake`` (``env_kwargs``): one of the mistakes a researcher makes
with their own env (issue 41, item 3); ``""`` is a correct env. Observation ``Box(4)``,
action ``Discrete(2)``, 10-step episodes. ``"step_raises_late"`` raises at the env's 25th
step over episodes (after the start-up check passed); ``"ctor_raises"`` raises in the
constructor, ``"needs_dependency"`` raises gymnasium's ``DependencyNotInstalled`` there.
``OnbNoObsSpace-v0`` never sets ``observation_space``; ``OnbText-v0`` has a
``Text`` action space; ``OnbNoSeed-v0``'s ``reset(self)`` takes no ``seed=``.
"""
import textwrap

ONB_ENV = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class OnbBad(gym.Env):
        def __init__(self, mistake=""):
            if mistake == "ctor_raises":
                raise FileNotFoundError("my env: config file 'arena.yaml' not found")
            if mistake == "needs_dependency":
                raise gym.error.DependencyNotInstalled("pybullet is not installed, run "
                                                       "`pip install pybullet`")
            self.mistake = mistake
            self._steps = 0  # over episodes
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self._t = 0

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self._t = 0
            if self.mistake == "reset_raises":
                raise ValueError("my reset bug: no level file")
            if self.mistake == "reset_shape":
                return np.zeros(3, np.float32), {}
            if self.mistake == "old_reset":
                return np.zeros(4, np.float32)
            return np.zeros(4, np.float32), {}

        def step(self, action):
            self._t += 1
            self._steps += 1
            obs = np.full(4, 0.1 * self._t, np.float32)
            reward = 1.0
            if self.mistake == "step_raises" or (self.mistake == "step_raises_late"
                                                 and self._steps == 25):
                raise RuntimeError("my step bug: bad action table")
            if self.mistake == "step_shape":
                obs = np.zeros((2, 2), np.float32)
            if self.mistake == "reward_array":
                reward = np.array([1.0, 0.0], np.float32)
            if self.mistake == "nan_obs" and self._t == 3:
                obs[1] = np.nan
            if self.mistake == "nan_reward" and self._t == 3:
                reward = float("nan")
            if self.mistake == "old_step":
                return obs, reward, self._t >= 10, {}
            return obs, reward, self._t >= 10, False, {}


    class OnbDict(gym.Env):
        """Its reset/step return the key 'speed' where the space says 'vel'."""
        def __init__(self):
            self.observation_space = gym.spaces.Dict({
                "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                "vel": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
            self.action_space = gym.spaces.Discrete(2)

        def _obs(self):
            return {"pos": np.zeros(2, np.float32), "speed": np.zeros(2, np.float32)}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return self._obs(), {}

        def step(self, action):
            return self._obs(), 0.0, False, False, {}


    class OnbNoObsSpace(gym.Env):
        def __init__(self):
            self.action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            return np.zeros(4, np.float32), {}

        def step(self, action):
            return np.zeros(4, np.float32), 0.0, False, False, {}


    class OnbText(OnbBad):
        """A Text action space: no distribution alf can put on it."""
        def __init__(self):
            super().__init__()
            self.action_space = gym.spaces.Text(5)


    class OnbNoSeed(OnbBad):
        """The old gym reset(self), without seed= and options=."""
        def reset(self):
            self._t = 0
            return np.zeros(4, np.float32), {}


    gym.register("OnbNoSeed-v0", entry_point=OnbNoSeed, max_episode_steps=10)
    gym.register("OnbText-v0", entry_point=OnbText, max_episode_steps=10)
    gym.register("OnbNoObsSpace-v0", entry_point=OnbNoObsSpace, max_episode_steps=10)
    gym.register("OnbBad-v0", entry_point=OnbBad, max_episode_steps=10)
    gym.register("OnbDict-v0", entry_point=OnbDict, max_episode_steps=10)
''')
