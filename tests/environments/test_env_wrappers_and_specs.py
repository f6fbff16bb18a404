"""MaskVelocityWrapper and the gymnasium space -> spec / converter rules."""
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from alf.environments import create_environment, spec_utils
from alf.environments.wrappers import MaskVelocityWrapper
from alf.errors import UserError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec


@pytest.mark.parametrize("env_name,masked", [("CartPole-v1", [1, 3]), ("Pendulum-v1", [2]),
                                             ("MountainCar-v0", [1]), ("Acrobot-v1", [4, 5])])
def test_mask_velocity_zeroes_velocities(env_name, masked):
    env = MaskVelocityWrapper(gym.make(env_name))
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
        assert np.all(obs[masked] == 0)
    kept = [i for i in range(obs.shape[0]) if i not in masked]
    assert np.any(obs[kept] != 0)


def test_mask_velocity_in_batched_env():
    with create_environment("CartPole-v1", 2, gym_wrappers=[MaskVelocityWrapper]) as env:
        ts = env.reset()
        for _ in range(5):
            assert (ts.observation[:, [1, 3]] == 0).all()
            ts = env.step(torch.tensor([0, 1]))


def test_mask_velocity_unknown_env_and_pickle():
    with pytest.raises(UserError, match="velocity"):
        MaskVelocityWrapper(PendulumEnv())  # no spec: unknown
    w = MaskVelocityWrapper(PendulumEnv(), velocity_indices=[2])
    assert w.observation(np.ones(3, np.float32)).tolist() == [1, 1, 0]
    w2 = pickle.loads(pickle.dumps(MaskVelocityWrapper(gym.make("CartPole-v1"))))
    obs, _ = w2.reset(seed=0)
    assert obs[1] == 0 and obs[3] == 0


def test_observation_specs_and_converters():
    box64 = spaces.Box(-1.0, 1.0, (3,), np.float64)
    spec = spec_utils.observation_spec_from_space(box64)
    assert spec == BoundedTensorSpec((3,), torch.float32, -1.0, 1.0)
    out = spec_utils.make_observation_converter(box64)(np.zeros((2, 3), np.float64))
    assert out.dtype == torch.float32 and out.shape == (2, 3)

    unbounded = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    assert type(spec_utils.observation_spec_from_space(unbounded)) is TensorSpec

    image = spaces.Box(0, 255, (4, 4, 3), np.uint8)
    assert spec_utils.observation_spec_from_space(image) == BoundedTensorSpec((4, 4, 3), torch.uint8, 0, 255)

    d = spaces.Dict({"img": image, "pos": box64, "n": spaces.Discrete(5)})
    dspec = spec_utils.observation_spec_from_space(d)
    assert set(dspec) == {"img", "pos", "n"}
    assert dspec["n"] == BoundedTensorSpec((), torch.int64, 0, 4)
    batch = {"img": np.zeros((2, 4, 4, 3), np.uint8), "pos": np.zeros((2, 3)), "n": np.arange(2)}
    conv = spec_utils.make_observation_converter(d)(batch)
    assert conv["img"].dtype == torch.uint8 and conv["pos"].dtype == torch.float32
    # uint8 arrays cross without a copy
    assert conv["img"].data_ptr() == batch["img"].__array_interface__["data"][0]


def test_action_specs_and_converter():
    assert spec_utils.action_spec_from_space(spaces.Discrete(3)) == BoundedTensorSpec((), torch.int64, 0, 2)
    md = spec_utils.action_spec_from_space(spaces.MultiDiscrete([3, 4]))
    assert md == BoundedTensorSpec((2,), torch.int64, 0, [2, 3])
    box = spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 5.0], np.float32))
    spec = spec_utils.action_spec_from_space(box)
    conv = spec_utils.ActionConverter(box, spec).convert
    action = torch.tensor([[3.0, -2.0], [0.5, 1.0]])
    env_a, prev = conv(action, np.array([False, True]))
    np.testing.assert_array_equal(env_a, [[1.0, 0.0], [0.5, 1.0]])
    assert env_a.dtype == np.float32
    assert prev.tolist() == [[3.0, -2.0], [0.0, 0.0]]
    with pytest.raises(UserError):
        spec_utils.action_spec_from_space(spaces.Text(4))
