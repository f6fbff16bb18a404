"""The per-step NaN/inf check (alf/environments/value_check.py): whole-batch checks of the
float observation leaves and the reward; the message names the env id, the row's env
index (with its group offset), the leaf and the step."""
import numpy as np
import pytest
from gymnasium import spaces

from alf.environments.value_check import FiniteValueCheck
from alf.errors import NonFiniteEnvValueError, RunFailedError

SPACE = spaces.Dict({"image": spaces.Box(0, 255, (2, 2), np.uint8),
                     "pos": spaces.Box(-1.0, 1.0, (3,), np.float32),
                     "parts": spaces.Tuple((spaces.Discrete(3),
                                            spaces.Box(-1.0, 1.0, (2,), np.float64)))})


def _obs(b=3):
    return {"image": np.zeros((b, 2, 2), np.uint8), "pos": np.zeros((b, 3), np.float32),
            "parts": (np.zeros(b, np.int64), np.zeros((b, 2), np.float64))}


def test_only_float_leaves_are_checked():
    check = FiniteValueCheck("E-v0", SPACE, 3)
    assert sorted(path for path, _ in check._leaves) == ["['parts'][1]", "['pos']"]
    check.reset(_obs())
    check.step(_obs(), np.zeros(3, np.float32))  # finite: no error


def test_a_nan_observation_names_env_leaf_and_step():
    check = FiniteValueCheck("E-v0", SPACE, 3)
    check.step(_obs(), np.zeros(3, np.float32))
    obs = _obs()
    obs["parts"][1][2, 1] = np.nan
    with pytest.raises(NonFiniteEnvValueError) as info:
        check.step(obs, np.zeros(3, np.float32))
    assert isinstance(info.value, RunFailedError)  # exit status 1
    assert str(info.value).startswith(
        "Environment 'E-v0' env 2 (of 3) returned a NaN observation['parts'][1] at its step 2:")
    assert str(info.value).endswith("create_environment.check_values=False")


@pytest.mark.parametrize("value,kind", [(np.inf, "inf"), (-np.inf, "-inf"), (np.nan, "NaN")])
def test_a_non_finite_reward_names_its_kind_and_the_group_row(value, kind):
    check = FiniteValueCheck("E-v0", SPACE, 3, env_id_offset=4)
    reward = np.zeros(3, np.float32)
    reward[1] = value
    with pytest.raises(NonFiniteEnvValueError, match=rf"^Environment 'E-v0' env 5 \(row 1 of "
                       rf"a group of 3\) returned a {kind} reward at its step 1:"):
        check.step(_obs(), reward)


def test_a_vector_reward_row_is_found():
    check = FiniteValueCheck("E-v0", spaces.Box(-1.0, 1.0, (1,), np.float32), 2)
    reward = np.zeros((2, 4), np.float32)
    reward[1, 3] = np.nan
    with pytest.raises(NonFiniteEnvValueError, match=r"env 1 \(of 2\) returned a NaN reward"):
        check.step(np.zeros((2, 1), np.float32), reward)


def test_a_nan_at_reset_is_step_0():
    check = FiniteValueCheck("E-v0", spaces.Box(-1.0, 1.0, (1,), np.float32), 2)
    with pytest.raises(NonFiniteEnvValueError, match=r"env 0 \(of 2\) returned a NaN "
                                                     r"observation at its step 0"):
        check.reset(np.full((2, 1), np.nan, np.float32))
