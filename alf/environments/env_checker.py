"""Check a user's environment once before a run writes anything: one line per mistake.

:func:`check_environment` builds one copy of the env exactly as a backend would
(:func:`~alf.environments.backends.make_single_env`), checks its spaces with gymnasium's
own ``passive_env_checker`` functions, then calls ``reset()`` and ``step()`` once on the
bare env (``env.unwrapped``, so gymnasium's wrappers cannot hide what the user's code
returned) and once through its wrappers (the ``gym_wrappers``, the time limit, Atari
preprocessing). What it returns is compared with gymnasium's API (``reset -> (obs,
info)``, ``step -> (obs, reward, terminated, truncated, info)``) and with the spaces:
observation shapes, dtypes, ``Dict`` keys, ``Tuple`` lengths, a scalar reward unless the
env declares a ``reward_space``, finite values. A mistake, or an exception raised inside
the env's ``reset()`` / ``step()``, is one :class:`~alf.errors.EnvCheckError` that starts
with the env id and the call and ends with the fix (or the env's own error message)::

    Environment 'OnbBad-v0': reset() returned an observation of shape (3,), not the shape
    (4,) of its observation_space Box(-1.0, 1.0, (4,), float32): return an array of shape
    (4,) (or fix observation_space)

It runs from :func:`~alf.environments.factory.create_environment` (``check_env=True``,
the default), once per process for each distinct env request (the evaluation env of the
same id is not checked again). The copy is seeded with the request's seed and closed
afterwards; Python's, numpy's and torch's global random states are restored, so the run
computes exactly what it would without the check. Turn it off with
``create_environment.check_env = False`` (an env that is expensive to build twice, or a
simulator that allows one connection).
"""
import dataclasses
import random
import warnings
from typing import AbstractSet, Any, Callable, Optional, Set

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.utils.passive_env_checker import check_action_space, check_observation_space

from alf.environments.backends import make_single_env
from alf.environments.env_errors import EnvErrorWrapper
from alf.environments.env_request import EnvRequest
from alf.environments.spec_utils import action_spec_from_space, observation_spec_from_space
from alf.environments.vector_reward import declared_reward_dim
from alf.errors import EnvCheckError, UserError

_checked: Set[str] = set()  # requests checked in this process (_request_key)


def _request_key(request: EnvRequest) -> str:
    """What makes two requests build the same env (not the batch size, seed or offset)."""
    return repr((request.env_name, sorted(request.env_kwargs.items(), key=str),
                 request.gym_wrappers, request.max_episode_steps, request.render_mode,
                 request.atari))


def check_environment(request: EnvRequest) -> None:
    """One copy of ``request``'s env: spaces, one ``reset()`` and one ``step()`` (with a
    sampled action) checked against gymnasium's API and the env's spaces.

    Raises:
        EnvCheckError: the first mistake found, in one line (env id, call, space, fix).
    """
    key = _request_key(request)
    if key in _checked:
        return
    name = request.env_name
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's warnings: the checks below say it
            env = _make(name, request)
            try:
                # the run's EnvErrorWrapper left out: the check names the call itself
                wrapped = env.env if isinstance(env, EnvErrorWrapper) else env
                # alf's specs only of the spaces the run sees, named on the bare env where
                # its wrappers keep them: a wrapper may turn a space alf has no spec for
                # into one it has (MiniGrid's MissionSpace through its observation wrapper)
                kept = {attr for attr in _SPACES
                        if getattr(wrapped, attr, None) is getattr(env.unwrapped, attr, None)}
                _check_env(f"Environment '{name}'", env.unwrapped, request.seed, specs=kept)
                if wrapped is not env.unwrapped:
                    _check_env(f"Environment '{name}' (through its wrappers)", wrapped,
                               request.seed, specs=set(_SPACES) - kept)
            finally:
                _close_quietly(env)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
    _checked.add(key)


def _make(name: str, request: EnvRequest) -> gym.Env:
    """One copy of the env as a backend builds it; an exception of its constructor (or
    gymnasium refusing it, e.g. no observation_space) is one line naming the env, ending
    with the env's own error; a keyword the constructor does not take names
    ``env_kwargs``."""
    try:
        return make_single_env(dataclasses.replace(request, num_envs=1, env_id_offset=0), 0)
    except (UserError, ModuleNotFoundError):
        raise  # alf's own messages; a missing package of an extra (alf.bin.extras)
    except gym.error.DependencyNotInstalled as e:  # as the backends say it (factory._build)
        raise UserError(f"Environment '{name}' needs an optional dependency: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's code: any error is reported
        kwargs = (" (fix create_environment.env_kwargs, or the constructor's arguments)"
                  if isinstance(e, TypeError) and "keyword argument" in str(e) else "")
        fix = "".join(f" (set self.{attr} to a gymnasium.spaces.Space in __init__)"
                      for attr in ("observation_space", "action_space")
                      if f"must specify an {attr.replace('_', ' ')}" in str(e))
        raise EnvCheckError(f"Environment '{name}': gym.make() raised{kwargs}{fix} "
                            f"{type(e).__name__}: {_one_line(e)}") from e


def _close_quietly(env: gym.Env) -> None:
    try:
        env.close()
    except Exception:  # noqa: BLE001 - the check's verdict stands; the copy is thrown away
        pass


_SPACES = ("observation_space", "action_space")


def _check_env(who: str, env: gym.Env, seed: int, specs: AbstractSet[str]) -> None:
    """Spaces, one reset and one step of ``env`` (bare or wrapped); ``who`` starts messages.
    ``specs``: the spaces (of ``_SPACES``) also checked for a spec alf has (those the run
    sees)."""
    for attr, check, to_spec in (
            ("observation_space", check_observation_space, observation_spec_from_space),
            ("action_space", check_action_space, action_spec_from_space)):
        try:
            check(getattr(env, attr, None))
        except AssertionError as e:
            raise EnvCheckError(f"{who}: {attr}: {_one_line(e)} (set self.{attr} to a "
                                f"gymnasium.spaces.Space in __init__)") from None
        try:  # a space alf has no spec for (Text, Graph, Sequence, ...)
            if attr in specs:
                to_spec(getattr(env, attr))
        except UserError as e:
            raise EnvCheckError(f"{who}: {attr}: {e}") from None
    result = _call(who, "reset()", env.reset, seed=seed)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
        raise EnvCheckError(f"{who}: reset() returned {type(result).__name__}, not a tuple "
                            "(obs, info) as gymnasium's API (which alf uses) has it: return "
                            "obs, {} (the old gym reset returned only obs)")
    _check_observation(who, "reset()", result[0], env.observation_space)
    result = _call(who, "step()", env.step, env.action_space.sample())
    _check_step_result(who, env, result)


def _call(who: str, call: str, fn: Callable, *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)``; an exception it raises becomes one line that names the env
    and the call first and ends with the exception's own message."""
    try:
        return fn(*args, **kwargs)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: any error is reported
        fix = (" (gymnasium's reset takes seed and options: def reset(self, *, seed=None, "
               "options=None), then super().reset(seed=seed))"
               if call == "reset()" and isinstance(e, TypeError) and "keyword argument" in str(e)
               else "")
        raise EnvCheckError(f"{who}: {call} raised{fix} {type(e).__name__}: {_one_line(e)}") from e


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or "(no message)"


def _check_step_result(who: str, env: gym.Env, result: Any) -> None:
    """``step()``'s return: 5 values, an observation of the space, a scalar reward unless
    the env declares a ``reward_space``, bool flags, an info dict."""
    if not isinstance(result, tuple) or len(result) != 5:
        n = len(result) if isinstance(result, tuple) else type(result).__name__
        old = (" (obs, reward, done, info): the old gym API; split done into terminated and "
               "truncated (truncated: cut short, e.g. by a time limit)") if n == 4 else ""
        raise EnvCheckError(f"{who}: step() returned {n} values{old}; gymnasium's API (which "
                            "alf uses) returns 5: (obs, reward, terminated, truncated, info)")
    obs, reward, terminated, truncated, info = result
    _check_observation(who, "step()", obs, env.observation_space)
    declared = declared_reward_dim(env)
    if not declared and (np.ndim(reward) != 0 or not _is_real(reward)):
        shape = np.shape(reward)
        raise EnvCheckError(
            f"{who}: step() returned a reward of shape {shape} ({type(reward).__name__}), but "
            "the env has no reward_space: return a float, or declare a vector reward with "
            f"self.reward_space = gym.spaces.Box(low, high, {shape}) in __init__")
    if not declared and not np.isfinite(reward):
        raise EnvCheckError(f"{who}: step() returned a reward of {reward}: return a finite float")
    for flag, value in (("terminated", terminated), ("truncated", truncated)):
        if np.ndim(value) != 0 or not isinstance(np.asarray(value).item(), (bool, int)):
            raise EnvCheckError(f"{who}: step() returned {flag} = {value!r}: return a bool")
    if not isinstance(info, dict):
        raise EnvCheckError(f"{who}: step() returned info of type {type(info).__name__}: "
                            "return a dict (e.g. {})")


def _is_real(value: Any) -> bool:
    """A real number (bool included: SyncVectorEnv stores it as 0.0/1.0)."""
    dtype = np.asarray(value).dtype
    return (np.issubdtype(dtype, np.number) or dtype == np.bool_) and \
        not np.issubdtype(dtype, np.complexfloating)


def _check_observation(who: str, call: str, obs: Any, space: spaces.Space) -> None:
    problem = observation_problem(obs, space)
    if problem is not None:
        raise EnvCheckError(f"{who}: {call} returned {problem}")


def observation_problem(obs: Any, space: spaces.Space, path: str = "observation"
                        ) -> Optional[str]:
    """What is wrong with ``obs`` for ``space`` (keys, length, shape, dtype, NaN/inf), as
    the end of a sentence "... returned <problem>", or None. Values outside a Box's bounds
    are accepted (gymnasium only warns, and alf stores them as they are)."""
    where = "observation_space" + path[len("observation"):]
    if isinstance(space, spaces.Dict):
        if not isinstance(obs, dict):
            return (f"an {path} of type {type(obs).__name__}, but {where} is a Dict with keys "
                    f"{list(space.spaces)}: return a dict")
        if set(obs) != set(space.spaces):
            missing = ", ".join(repr(k) for k in space.spaces if k not in obs)
            extra = ", ".join(repr(k) for k in obs if k not in space.spaces)
            parts = [p for p in (missing and f"missing {missing}", extra and f"unexpected {extra}") if p]
            return (f"an {path} with keys {list(obs)}, but {where} is a Dict with keys "
                    f"{list(space.spaces)} ({', '.join(parts)}): return exactly the space's "
                    "keys (or fix observation_space)")
        items = [(repr(k), obs[k], s) for k, s in space.spaces.items()]
    elif isinstance(space, spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            got = f"{len(obs)} items" if isinstance(obs, (tuple, list)) else type(obs).__name__
            return (f"an {path} of {got}, but {where} is a Tuple of {len(space.spaces)}: "
                    "return a tuple of that length")
        items = [(str(i), o, s) for i, (o, s) in enumerate(zip(obs, space.spaces))]
    else:
        return _leaf_problem(obs, space, path, where)
    for key, sub_obs, sub_space in items:
        problem = observation_problem(sub_obs, sub_space, f"{path}[{key}]")
        if problem is not None:
            return problem
    return None


def _leaf_problem(obs: Any, space: spaces.Space, path: str, where: str) -> Optional[str]:
    """Shape, dtype and finiteness of one array observation against a Box, Discrete,
    MultiDiscrete or MultiBinary space (other spaces: gymnasium's ``contains``)."""
    if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                              spaces.MultiBinary)):
        return None if space.contains(obs) else f"an {path} {obs!r} outside {where} {space}"
    arr = np.asarray(obs)
    if arr.shape != space.shape:
        return (f"an {path} of shape {arr.shape}, not the shape {space.shape} of its {where} "
                f"{space}: return an array of shape {space.shape} (or fix {where})")
    if arr.dtype == object or not np.can_cast(arr.dtype, space.dtype, casting="same_kind"):
        return (f"an {path} of dtype {arr.dtype}, which {where} {space} cannot hold: return "
                f"{np.dtype(space.dtype).name} values (e.g. obs.astype(np.{np.dtype(space.dtype).name}))")
    if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        return f"an {path} holding {arr[~np.isfinite(arr)].flat[0]}: return finite values"
    return None
