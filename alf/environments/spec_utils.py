"""Gymnasium spaces -> alf specs, and the numpy <-> torch converters built from them.

Conventions (the contract the rest of alf relies on):

- ``Box`` observations: float64 becomes float32; every other dtype (uint8
  images, int, bool) is kept. The spec is a :class:`BoundedTensorSpec` when
  *all* bounds are finite and a plain :class:`TensorSpec` otherwise (e.g.
  CartPole's velocities are unbounded), so ``spec.sample()`` never produces
  ``inf``.
- ``Discrete(n, start)`` -> ``BoundedTensorSpec((), int64, start, start + n - 1)``.
- ``MultiDiscrete(nvec, start)`` -> ``BoundedTensorSpec(nvec.shape, int64, start, start + nvec - 1)``.
- ``MultiBinary(n)`` -> ``BoundedTensorSpec(n, int8, 0, 1)``.
- ``Box`` actions -> ``BoundedTensorSpec(shape, float32, low, high)`` (an
  unbounded Box action gives a plain float32 :class:`TensorSpec`).
- ``Dict`` spaces -> ``dict`` nests (gymnasium key order), ``Tuple`` -> ``tuple``.

Converters are built once per environment from its *single* (unbatched) space,
so the per-step work is a couple of ``astype``/``from_numpy`` calls with no
type dispatch.
"""
from typing import Any, Callable, Optional

import numpy as np
import torch
from gymnasium import spaces

from alf.errors import UserError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

# numpy dtype used for observations of a given Box dtype (float64 -> float32).
_OBS_DTYPE_MAP = {np.dtype(np.float64): np.dtype(np.float32)}


def _obs_np_dtype(dtype: np.dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    return _OBS_DTYPE_MAP.get(dtype, dtype)


def _finite_box_spec(shape, dtype, low, high) -> TensorSpec:
    low = np.asarray(low)
    high = np.asarray(high)
    if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
        return BoundedTensorSpec(shape, dtype, low, high)
    return TensorSpec(shape, dtype)


def observation_spec_from_space(space: spaces.Space) -> Any:
    """Spec nest (no batch dim) of what :func:`make_observation_converter` returns."""
    if isinstance(space, spaces.Box):
        return _finite_box_spec(space.shape, _obs_np_dtype(space.dtype), space.low, space.high)
    if isinstance(space, spaces.Discrete):
        return BoundedTensorSpec((), torch.int64, int(space.start), int(space.start + space.n - 1))
    if isinstance(space, spaces.MultiDiscrete):
        return BoundedTensorSpec(space.shape, torch.int64, space.start, space.start + space.nvec - 1)
    if isinstance(space, spaces.MultiBinary):
        return BoundedTensorSpec(space.shape, torch.int8, 0, 1)
    if isinstance(space, spaces.Dict):
        return {k: observation_spec_from_space(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(observation_spec_from_space(s) for s in space.spaces)
    hint = ""
    if type(space).__name__ == "MissionSpace":  # MiniGrid's text mission
        hint = (" For MiniGrid envs add create_environment.gym_wrappers = "
                "[@MiniGridObservationWrapper] (its partial view as a vector).")
    raise UserError(f"Unsupported observation space {space!r}: alf handles Box, Discrete, "
                    f"MultiDiscrete, MultiBinary and Dict/Tuple nests of those.{hint}")


def action_spec_from_space(space: spaces.Space) -> Any:
    """Action spec nest (no batch dim) for a single environment's action space."""
    if isinstance(space, spaces.Discrete):
        return BoundedTensorSpec((), torch.int64, int(space.start), int(space.start + space.n - 1))
    if isinstance(space, spaces.Box):
        if not np.issubdtype(space.dtype, np.floating):
            return BoundedTensorSpec(space.shape, torch.int64, space.low, space.high)
        return _finite_box_spec(space.shape, torch.float32, space.low, space.high)
    if isinstance(space, spaces.MultiDiscrete):
        return BoundedTensorSpec(space.shape, torch.int64, space.start, space.start + space.nvec - 1)
    if isinstance(space, spaces.MultiBinary):
        return BoundedTensorSpec(space.shape, torch.int64, 0, 1)
    if isinstance(space, spaces.Dict):
        return {k: action_spec_from_space(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(action_spec_from_space(s) for s in space.spaces)
    raise UserError(f"Unsupported action space {space!r}: alf handles Discrete, Box, "
                    "MultiDiscrete, MultiBinary and Dict/Tuple nests of those.")


# ---------------------------------------------------------------------------
# observations: numpy nest [B, ...] -> torch nest [B, ...]


def _leaf_obs_converter(np_dtype: np.dtype, copy: bool) -> Callable[[np.ndarray], torch.Tensor]:
    from_numpy = torch.from_numpy

    def convert(x: np.ndarray) -> torch.Tensor:
        if x.dtype != np_dtype:
            x = x.astype(np_dtype)  # always a fresh array
            if not x.flags.c_contiguous:  # astype keeps e.g. Fortran order
                x = np.ascontiguousarray(x)
        elif copy or not (x.flags.c_contiguous and x.flags.writeable):
            # fresh, C-contiguous, writable (torch.from_numpy rejects read-only arrays;
            # downstream .view() needs contiguity)
            x = np.array(x, order="C")
        return from_numpy(x)

    return convert


def make_observation_converter(space: spaces.Space, copy: bool = False
                               ) -> Callable[[Any], Any]:
    """Function mapping a batched numpy observation nest to torch tensors ``[B, ...]``.

    Args:
        space: the *single* environment observation space.
        copy: copy arrays even when no dtype conversion is needed. Use it for
            vector envs that return views of internal buffers (gymnasium's
            Sync/Async vector envs with ``copy=True`` and CartPoleVectorEnv
            return fresh arrays, so no copy is needed there).
    """
    if isinstance(space, spaces.Box):
        return _leaf_obs_converter(_obs_np_dtype(space.dtype), copy)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return _leaf_obs_converter(np.dtype(np.int64), copy)
    if isinstance(space, spaces.MultiBinary):
        return _leaf_obs_converter(np.dtype(np.int8), copy)
    if isinstance(space, spaces.Dict):
        convs = {k: make_observation_converter(s, copy) for k, s in space.spaces.items()}
        return lambda obs: {k: c(obs[k]) for k, c in convs.items()}
    if isinstance(space, spaces.Tuple):
        convs = tuple(make_observation_converter(s, copy) for s in space.spaces)
        return lambda obs: tuple(c(o) for c, o in zip(convs, obs))
    observation_spec_from_space(space)  # raises the UserError
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------
# actions: torch nest [B, ...] -> (numpy nest for the env, torch prev_action nest)


def to_numpy(x: Any) -> np.ndarray:
    """A torch tensor (any device) or array-like as a numpy array (no copy on CPU)."""
    if type(x) is torch.Tensor:  # pylint: disable=unidiomatic-typecheck
        try:
            return x.numpy()  # fast path: CPU tensor without grad (~0.7 us)
        except (RuntimeError, TypeError):
            pass
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class ActionConverter:
    """Turns the agent's batched action nest into (env input, ``prev_action``).

    Call it as ``convert(action, reset_mask) -> (env_action, prev_action)``:

    - ``env_action``: numpy nest in the space's dtype; continuous actions are
      clipped to the Box bounds (the agent keeps its own, unclipped choice in
      its experience; clipping is purely env-side).
    - ``prev_action``: a fresh torch copy of the agent's (unclipped) action in
      the action spec's dtype, with the rows in ``reset_mask`` (``[B]`` bool,
      or None for "no row") zeroed: those envs start a new episode and ignore
      the action. With ``executed=True``: of the action the env receives
      (clipped to the Box bounds), for ``TrainerConfig.overwrite_policy_output``.

    ``ActionConverter(space, spec).convert`` is a plain bound method with no
    type dispatch for single (non-nested) action spaces.
    """

    def __init__(self, space: spaces.Space, spec: Any, executed: bool = False):
        if isinstance(space, (spaces.Dict, spaces.Tuple)):
            if isinstance(space, spaces.Dict):
                self._children = [(k, ActionConverter(s, spec[k], executed).convert)
                                  for k, s in space.spaces.items()]
            else:
                self._children = [(i, ActionConverter(s, spec[i], executed).convert)
                                  for i, s in enumerate(space.spaces)]
            self._is_dict = isinstance(space, spaces.Dict)
            self.convert = self._convert_nest
            return
        self._env_dtype = np.dtype(space.dtype) if space.dtype is not None else np.dtype(np.int64)
        self._spec_dtype = torch.empty((), dtype=spec.dtype).numpy().dtype
        self._low: Optional[np.ndarray] = None
        self._high: Optional[np.ndarray] = None
        self._executed = bool(executed)
        if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
            if np.any(np.isfinite(space.low)) or np.any(np.isfinite(space.high)):
                self._low = space.low.astype(space.dtype)
                self._high = space.high.astype(space.dtype)
        self.convert = self._convert_leaf

    def _convert_leaf(self, action: Any, reset_mask: Optional[np.ndarray]):
        a = to_numpy(action)
        if self._low is not None:
            env_a = np.clip(a, self._low, self._high).astype(self._env_dtype, copy=False)
        elif a.dtype != self._env_dtype:
            env_a = a.astype(self._env_dtype)
        else:
            env_a = a  # read synchronously by the env; never stored by alf
        # always a copy: the caller may reuse its buffer
        prev = (env_a if self._executed else a).astype(self._spec_dtype)
        if reset_mask is not None:
            prev[reset_mask] = 0
        return env_a, torch.from_numpy(prev)

    def _convert_nest(self, action: Any, reset_mask: Optional[np.ndarray]):
        env_actions, prev_actions = {}, {}
        for key, convert in self._children:
            env_actions[key], prev_actions[key] = convert(action[key], reset_mask)
        if not self._is_dict:
            n = len(self._children)
            return (tuple(env_actions[i] for i in range(n)),
                    tuple(prev_actions[i] for i in range(n)))
        return env_actions, prev_actions
