"""One line for an exception raised by a sub-env's own ``reset()``/``step()`` during a run.

The start-up check (:mod:`alf.environments.env_checker`) calls ``reset()`` and ``step()``
once; a bug that shows only later (a lookup table that runs out at the 25th step, a
level file read at the third episode) raised from inside gymnasium's vector env: a
40-line traceback through ``sync_vector_env.py`` and gymnasium's wrappers that never
named the env or its index. :class:`EnvErrorWrapper` is the outermost layer of every
sub-env that :func:`~alf.environments.backends.make_single_env` builds: an exception
becomes one :class:`~alf.errors.EnvRaisedError` naming the env id, the env's index in the
batch (as :mod:`alf.environments.value_check` names it), the call and how many
``step()`` calls the env had taken, and ending with the env's own error::

    Environment 'OnbBad-v0' env 0 (of 2): step() at its step 25 raised RuntimeError:
    my step bug: bad action table

Only the env's own errors are renamed: an exception raised by alf's code (its wrappers,
e.g. Atari preprocessing) or by gymnasium's wrappers (e.g. ``ResetNeeded``: a step before
a reset) is a bug of alf's driving the env, and keeps its traceback.
The original exception is its ``__cause__`` (``--debug`` prints both tracebacks). Cost:
one Python call and an integer increment per sub-env step; values, spaces, seeds and
random streams pass through untouched.
"""
import os
import traceback
from typing import Any

import gymnasium as gym
import gymnasium.wrappers

from alf.errors import EnvRaisedError, RunFailedError, UserError


def env_label(env_name: str, index: int, num_envs: int, env_id_offset: int) -> str:
    """``"Environment 'X' env 3 (of 8)"`` (or ``"... env 5 (row 1 of a group of 4)"`` for an
    env group with ``env_id_offset`` 4): the env as the run's messages name it."""
    if env_id_offset == 0:
        where = f"env {index} (of {num_envs})"
    else:
        where = f"env {env_id_offset + index} (row {index} of a group of {num_envs})"
    return f"Environment '{env_name}' {where}"


_NOT_THE_ENV = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                     for m in (gymnasium.wrappers, __import__("alf")))


def raised_by_the_env(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is outside alf's package and
    gymnasium's wrappers: the env's own code (or a package it calls) raised it."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return True
    return not os.path.abspath(frames[-1].filename).startswith(_NOT_THE_ENV)


class EnvErrorWrapper(gym.Wrapper):
    """Turns an exception of the wrapped env's ``reset()``/``step()`` into one
    :class:`~alf.errors.EnvRaisedError` (see the module docstring).

    Args:
        env: the sub-env (its ``gym_wrappers`` applied).
        label: :func:`env_label` of the sub-env.
    """

    def __init__(self, env: gym.Env, label: str):
        super().__init__(env)
        self._label = label
        self._steps = 0

    def step(self, action: Any):
        self._steps += 1
        try:
            return self.env.step(action)
        except (UserError, RunFailedError):
            raise
        except Exception as e:  # noqa: BLE001 - the user's code: named, then re-raised
            if not raised_by_the_env(e):
                raise
            raise self._error(f"step() at its step {self._steps}", e) from e

    def reset(self, **kwargs: Any):
        try:
            return self.env.reset(**kwargs)
        except (UserError, RunFailedError):
            raise
        except Exception as e:  # noqa: BLE001 - the user's code: named, then re-raised
            if not raised_by_the_env(e):
                raise
            raise self._error(f"reset() after its step {self._steps}", e) from e

    def _error(self, call: str, error: Exception) -> EnvRaisedError:
        text = " ".join(str(error).split()) or "(no message)"
        return EnvRaisedError(f"{self._label}: {call} raised {type(error).__name__}: {text}")
