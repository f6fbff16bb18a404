"""An env's own vector reward ``[d]`` through every per-env backend
(alf/environments/vector_reward.py)."""
import gymnasium as gym
import pytest
import torch

from alf.environments import create_environment
from alf.errors import UserError

ENV = "tests.environments.two_goal_env:TwoGoalCorridor-v0"


@pytest.mark.parametrize("backend", ["sync", "threads", "async"])
def test_each_column_arrives_batched_and_reset_rows_get_zero(backend):
    env = create_environment(ENV, 2, backend=backend)
    try:
        assert tuple(env.reward_spec().shape) == (2,)
        assert tuple(env.time_step_spec().reward.shape) == (2,)
        ts = env.reset()
        assert tuple(ts.reward.shape) == (2, 2) and not ts.reward.any()
        right_left = torch.tensor([1, 0])
        rewards, steps = [], []
        for _ in range(4):
            ts = env.step(right_left)
            rewards.append(ts.reward.clone())
            steps.append(ts.step_type.tolist())
    finally:
        env.close()
    # 3 steps reach the ends: env 0 the right goal [1, 0], env 1 the left goal [0, 1]
    assert steps[2] == [2, 2] and steps[3] == [0, 0]
    assert torch.equal(rewards[2], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    for t in (0, 1, 3):  # mid-corridor steps, and the FIRST steps of the autoreset
        assert not rewards[t].any()


def test_a_scalar_env_keeps_its_scalar_reward():
    env = create_environment("CartPole-v1", 2, backend="sync")
    try:
        assert tuple(env.reward_spec().shape) == ()
        assert tuple(env.reset().reward.shape) == (2,)
    finally:
        env.close()


def test_a_reward_that_does_not_match_its_reward_space_is_one_error_at_creation():
    """The start-up env check (alf/environments/env_checker.py) steps a copy once."""
    with pytest.raises(UserError, match=r"reward_space has 3 columns but step returned "
                                         r"a reward of shape \(2,\)"):
        create_environment(ENV, 1, backend="sync", env_kwargs={"reward_shape": (3,)})


def test_a_reward_that_does_not_match_its_reward_space_is_one_error():
    env = create_environment(ENV, 1, backend="sync", check_env=False,
                             env_kwargs={"reward_shape": (3,)})
    try:
        env.reset()
        with pytest.raises(UserError, match=r"reward_space has 3 columns but step returned "
                                             r"a reward of shape \(2,\)"):
            env.step(torch.tensor([1]))
    finally:
        env.close()


def test_a_reward_space_alf_cannot_carry_is_one_error():
    with pytest.raises(UserError, match="is not a scalar or a 1-D Box"):
        create_environment(ENV, 1, backend="sync", env_kwargs={"reward_shape": (2, 2)})


class _Scalarised(gym.Wrapper):
    """MO-Gymnasium's LinearReward, in short: a weighted sum, and no reward_space."""

    def __init__(self, env):
        super().__init__(env)
        self.reward_space = None

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward @ [0.25, 0.75]), terminated, truncated, info


def test_a_wrapper_that_scalarises_the_reward_gives_a_scalar_reward():
    env = create_environment(ENV, 1, backend="sync", gym_wrappers=[_Scalarised])
    try:
        assert tuple(env.reward_spec().shape) == ()
        env.reset()
        rewards = [float(env.step(torch.tensor([0])).reward) for _ in range(3)]
    finally:
        env.close()
    assert rewards == [0.0, 0.0, 0.75]  # the left goal, weighted


def test_reward_normalizer_on_columns_names_its_setting(clean_gin):
    from alf.algorithms.data_transformers import RewardNormalizer
    from alf.data_structures import TimeStep
    from alf.errors import ConfigError
    from alf.tensor_specs import TensorSpec
    norm = RewardNormalizer(TensorSpec((1,)))
    ts = TimeStep(step_type=torch.ones(3, dtype=torch.int32), reward=torch.ones(3, 2),
                  discount=torch.ones(3), observation=torch.zeros(3, 1),
                  prev_action=torch.zeros(3), env_id=torch.arange(3), env_info={})
    with pytest.raises(ConfigError, match=r"set RewardNormalizer.reward_shape = \(2,\)"):
        norm.transform_timestep(ts, torch.zeros(3))
    ok = RewardNormalizer(TensorSpec((1,)), reward_shape=(2,))
    out, state = ok.transform_timestep(ts, torch.zeros(3, 2))
    assert out.reward.shape == (3, 2) and state.shape == (3, 2)
