"""The per-step check that an environment's observations and rewards are finite.

A NaN or infinite observation or reward reaches the agent's losses and, trained on,
turns its weights into NaN; SB3's ``VecCheckNan`` (Raffin et al. 2021) checks the
vector env's arrays at every step for that reason. :class:`FiniteValueCheck` does the
same for :class:`~alf.environments.gym_environment.GymVectorEnvironment`: one
``np.isfinite(x).all()`` over the whole ``[B, ...]`` batch per float observation leaf
and one over the ``[B]`` (or ``[B, d]``) reward, no Python loop over envs; integer
observations (Atari frames, discrete ids) cannot hold NaN and are skipped. Only a failed
check looks for the row. ``create_environment.check_values = False`` turns it off.
"""
from typing import Any, Callable, List, Tuple

import numpy as np
from gymnasium import spaces

from alf.errors import NonFiniteEnvValueError

_Getter = Callable[[Any], np.ndarray]


def _float_leaves(space: spaces.Space, path: str = "", get: _Getter = lambda o: o
                  ) -> List[Tuple[str, _Getter]]:
    """``(path, getter)`` of each float ``Box`` leaf of ``space`` (``path``: ``"['pos']"``,
    ``"[0]"`` or ``""`` for the whole observation)."""
    if isinstance(space, spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in _float_leaves(
            sub, f"{path}[{key!r}]", lambda o, g=get, k=key: g(o)[k])]
    if isinstance(space, spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in _float_leaves(
            sub, f"{path}[{i}]", lambda o, g=get, j=i: g(o)[j])]
    if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
        return [(path, get)]
    return []


class FiniteValueCheck:
    """Raises :class:`~alf.errors.NonFiniteEnvValueError` for a NaN/inf observation or
    reward of a batched env, naming the env id, the env's index and its step.

    Args:
        env_name: the environment id (for the message).
        observation_space: the *single* env's observation space.
        batch_size: ``B``.
        env_id_offset: ``TimeStep.env_id`` of row 0 (env groups).
    """

    def __init__(self, env_name: str, observation_space: spaces.Space, batch_size: int,
                 env_id_offset: int = 0):
        self._env_name = env_name
        self._leaves = _float_leaves(observation_space)
        self._batch_size = batch_size
        self._env_id_offset = env_id_offset
        self._steps = 0

    def reset(self, obs: Any) -> None:
        """Check the observations of a full ``reset()`` (step 0)."""
        self._check_observation(obs)

    def step(self, obs: Any, reward: np.ndarray) -> None:
        """Check one step's observations ``[B, ...]`` and float32 rewards ``[B]`` / ``[B, d]``."""
        self._steps += 1
        if not np.isfinite(reward).all():
            self._raise("reward", "", reward)
        self._check_observation(obs)

    def _check_observation(self, obs: Any) -> None:
        for path, get in self._leaves:
            x = get(obs)
            if not np.isfinite(x).all():
                self._raise("observation", path, x)

    def _raise(self, what: str, path: str, batch: np.ndarray) -> None:
        rows = np.asarray(batch).reshape(self._batch_size, -1)
        row = int(np.flatnonzero(~np.isfinite(rows).all(axis=1))[0])
        bad = rows[row][~np.isfinite(rows[row])]
        kind = "NaN" if np.isnan(bad).any() else ("-inf" if (bad < 0).all() else "inf")
        offset = self._env_id_offset
        env = f"env {offset + row}" + (f" (of {self._batch_size})" if offset == 0 else
                                       f" (row {row} of a group of {self._batch_size})")
        raise NonFiniteEnvValueError(
            f"Environment '{self._env_name}' {env} returned a {kind} {what}{path} at its step "
            f"{self._steps}: the run stops before the agent learns from it (the newest "
            "checkpoint is kept); fix the env, or turn this check off with "
            "create_environment.check_values=False")
