"""MiniGrid ids and MiniGridObservationWrapper (the exploration benchmark's envs)."""
import builtins

import numpy as np
import pytest

from alf.environments.env_ids import find_env_spec
from alf.environments.factory import create_environment
from alf.environments.wrappers import MiniGridObservationWrapper
from alf.errors import UserError

pytest.importorskip("minigrid")

DOORKEY = "MiniGrid-DoorKey-8x8-v0"


def test_wrapper_gives_the_partial_view_as_a_flat_float_vector():
    env = create_environment(DOORKEY, num_parallel_environments=2, seed=3,
                             gym_wrappers=[MiniGridObservationWrapper])
    try:
        spec = env.observation_spec()
        assert tuple(spec.shape) == (147,) and str(spec.dtype) == "torch.float32"
        ts = env.reset()
        assert tuple(ts.observation.shape) == (2, 147)
        import gymnasium as gym
        raw = gym.make(DOORKEY)
        obs, _ = raw.reset(seed=3)
        # the same view, flattened row-major: object, colour, state index per cell
        np.testing.assert_array_equal(ts.observation[0].numpy(),
                                      obs["image"].astype(np.float32).reshape(-1))
        assert set(np.unique(obs["image"][..., 0])) <= set(range(11))
    finally:
        env.close()


def test_a_minigrid_env_without_the_wrapper_names_the_wrapper():
    with pytest.raises(UserError, match=r"gym_wrappers = \[@MiniGridObservationWrapper\]"):
        create_environment(DOORKEY)


def test_the_wrapper_on_a_non_minigrid_env_says_what_it_needs():
    with pytest.raises(UserError, match="MiniGrid's dict observation with an 'image' entry"):
        create_environment("CartPole-v1", gym_wrappers=[MiniGridObservationWrapper])


def test_missing_minigrid_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_minigrid(name, *args, **kwargs):
        if name == "minigrid":
            raise ImportError("No module named 'minigrid'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_minigrid)
    with pytest.raises(UserError, match=r"needs minigrid.*pip install -e \.\[minigrid\]"):
        find_env_spec("MiniGrid-NotRegisteredYet-v0")  # as before minigrid registers it
