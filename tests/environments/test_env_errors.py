"""EnvErrorWrapper names only the env's own errors (alf.environments.env_errors): an
exception from the env's code becomes one EnvRaisedError naming the env, its index, the
call and the step, the env's message last; one raised by gymnasium's wrappers or by alf
(alf driving the env wrongly) keeps its type and traceback, so alf's bugs are not blamed
on the user's env."""
import gymnasium as gym
import numpy as np
import pytest

from alf.environments.env_errors import EnvErrorWrapper, raised_by_the_env
from alf.errors import EnvRaisedError

LABEL = "Environment 'Mine-v0' env 2 (of 4)"


class _Raises(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        raise KeyError("level 7")


def test_the_envs_own_error_is_named_with_its_message_last():
    env = EnvErrorWrapper(_Raises(), LABEL)
    env.reset(seed=0)
    with pytest.raises(EnvRaisedError) as info:
        env.step(0)
    assert str(info.value) == f"{LABEL}: step() at its step 1 raised KeyError: 'level 7'"
    assert isinstance(info.value.__cause__, KeyError)


def test_a_gymnasium_wrapper_error_keeps_its_type():
    """``step()`` before ``reset()`` is refused by gymnasium's OrderEnforcing: alf's bug,
    not the env's."""
    env = EnvErrorWrapper(gym.make("CartPole-v1"), LABEL)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)


def test_an_error_raised_in_alf_code_is_not_the_envs():
    code = compile("raise ValueError('alf bug')", gym.__file__.replace(
        "gymnasium", "alf_placeholder"), "exec")  # a frame outside alf: the env's
    with pytest.raises(ValueError) as info:
        exec(code, {})
    assert raised_by_the_env(info.value)
    import alf.environments.backends as backends
    code = compile("raise ValueError('alf bug')", backends.__file__, "exec")
    with pytest.raises(ValueError) as info:
        exec(code, {})
    assert not raised_by_the_env(info.value)
