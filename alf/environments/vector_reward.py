"""An environment's own vector reward, carried through gymnasium's vector envs.

A single env declares a reward of ``d`` columns the way MO-Gymnasium does (Felten et
al. 2023): a ``reward_space`` attribute, a ``Box`` of shape ``(d,)``, and ``step``
returning a ``[d]`` array as its reward. gymnasium's ``SyncVectorEnv`` keeps one float
per env, so :func:`carry_vector_reward` wraps such an env in :class:`VectorRewardToInfo`:
its reward goes to ``info[REWARD_VECTOR_KEY]`` (which every vector env batches to
``[B, d]``, with a ``_``-prefixed mask of the rows that have it) and ``metadata``
says ``d`` (:data:`REWARD_DIM_KEY`; ``AsyncVectorEnv`` copies the first env's
metadata, so the parent learns ``d`` without building an env). ``GymVectorEnvironment``
reads both: its ``reward_spec()`` is ``TensorSpec([d])`` and its rewards ``[B, d]``.

Per-env backends only (``sync``, ``threads``, ``async``); a native vector env's
reward is a scalar. What the rest of alf does with ``[d]`` columns:
docs/design/agent.md (decision 4).
"""
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from alf.errors import UserError

#: the info entry holding a sub-env's reward vector ``[d]`` (batched: ``[B, d]``)
REWARD_VECTOR_KEY = "alf_reward_vector"
#: the metadata entry holding ``d``
REWARD_DIM_KEY = "alf_reward_dim"


def declared_reward_dim(env: gym.Env) -> int:
    """``d`` when ``env`` declares a vector reward (``reward_space`` of shape ``(d,)`` on
    the outermost layer, wrapper or env, that has the attribute; a wrapper that
    scalarises the reward sets it to None), else 0 (a scalar reward).

    Raises:
        UserError: a ``reward_space`` alf cannot carry (not a 1-D Box).
    """
    space, layer = None, env
    while True:  # the outermost layer that declares one (gymnasium 1.x does not forward)
        if "reward_space" in vars(layer) or hasattr(type(layer), "reward_space"):
            space = layer.reward_space
            break
        if not isinstance(layer, gym.Wrapper):
            break
        layer = layer.env
    if space is None:
        return 0
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) <= 1):
        raise UserError(f"Environment {env.spec.id if env.spec else type(env).__name__}: "
                        f"reward_space {space!r} is not a scalar or a 1-D Box; alf carries "
                        "scalar rewards and vectors of reward columns [d].")
    return int(space.shape[0]) if space.shape else 0


class VectorRewardToInfo(gym.Wrapper):
    """Moves a ``[d]`` reward into ``info[REWARD_VECTOR_KEY]`` (float32) and returns reward
    0.0 in its place; ``metadata[REWARD_DIM_KEY] = d``.

    Args:
        env: a single env whose ``step`` returns a ``[d]`` reward.
        reward_dim: ``d``.
    """

    def __init__(self, env: gym.Env, reward_dim: int):
        super().__init__(env)
        self._reward_dim = int(reward_dim)
        self.metadata = {**env.metadata, REWARD_DIM_KEY: self._reward_dim}

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        vector = np.asarray(reward, dtype=np.float32).reshape(-1)
        if vector.shape != (self._reward_dim,):
            raise UserError(f"Environment {self.env.spec.id if self.env.spec else ''}: its "
                            f"reward_space has {self._reward_dim} columns but step returned "
                            f"a reward of shape {np.shape(reward)}. alf reads reward_space "
                            "from the outermost wrapper that has one, else the unwrapped "
                            "env: a wrapper that turns the reward into a scalar sets "
                            "self.reward_space = None.")
        info = dict(info)
        info[REWARD_VECTOR_KEY] = vector
        return obs, 0.0, terminated, truncated, info


def carry_vector_reward(env: gym.Env) -> gym.Env:
    """``env`` wrapped in :class:`VectorRewardToInfo` when it declares a vector reward."""
    dim = declared_reward_dim(env)
    return VectorRewardToInfo(env, dim) if dim else env


def reward_dim_of(vector_env: gym.vector.VectorEnv) -> int:
    """``d`` of a vector env whose sub-envs carry a vector reward (0: scalar)."""
    return int(vector_env.metadata.get(REWARD_DIM_KEY, 0) or 0)


def batched_reward_vector(info: Dict[str, Any], batch_size: int, dim: int
                          ) -> np.ndarray:
    """``[B, d]`` float32 rewards from a vector env's ``info`` (rows without an entry,
    e.g. those just reset, get 0)."""
    out = np.zeros((batch_size, dim), dtype=np.float32)
    values: Optional[np.ndarray] = info.get(REWARD_VECTOR_KEY)
    if values is None:
        return out
    mask = np.asarray(info.get("_" + REWARD_VECTOR_KEY, np.ones(batch_size, np.bool_)))
    out[mask] = np.asarray(values, dtype=np.float32).reshape(batch_size, dim)[mask]
    return out
