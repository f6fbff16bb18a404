"""HER's ``future`` relabeling (alf/algorithms/hindsight.py) on a buffer of known episodes
(tests/algorithms/her_fixtures.py): goals come from the same episode, at or after the
sequence's last step; rewards are recomputed; the fraction is k / (k + 1); bad specs and
sources are refused in one line; and the episode-end search of the buffer."""
import pickle

import gymnasium as gym
import pytest
import torch

from alf.algorithms.data_transformers import (IdentityDataTransformer,
                                              SequentialDataTransformer)
from alf.algorithms.hindsight import HindsightRelabeler
from alf.algorithms.replay_training import preprocess_sampled
from alf.data_structures import BatchInfo
from alf.environments.goal_reward import GoalEnvReward
from alf.errors import ConfigError
from alf.replay_buffers.episode_ends import episode_ends
from alf.tensor_specs import TensorSpec
from tests.algorithms.her_fixtures import ENDS, OBS_SPEC, filled_buffer, goal_reward

BIT_FLIPPING = "alf.examples.bit_flipping_env:BitFlipping-v0"


@pytest.mark.parametrize("window", [1, 2, 64])
def test_episode_ends_finds_the_last_step_or_the_newest(window):
    buffer = filled_buffer()
    env_ids = torch.tensor([0] * 10 + [1] * 10)
    positions = torch.arange(10).repeat(2)
    ends = episode_ends(buffer, env_ids, positions, window=window)
    assert ends.tolist() == ENDS[0] + ENDS[1]


def test_episode_ends_in_a_wrapped_ring():
    """Capacity 6: positions 4-9 are stored (slots wrap); ends are absolute positions."""
    buffer = filled_buffer(capacity=6)
    env_ids = torch.tensor([0] * 6 + [1] * 6)
    positions = torch.arange(4, 10).repeat(2)
    assert episode_ends(buffer, env_ids, positions, window=4).tolist() == \
        ENDS[0][4:] + ENDS[1][4:]


def _sample(buffer, B=512, L=2, seed=0):
    torch.manual_seed(seed)
    exp, info = buffer.get_batch(B, L)
    return exp._replace(batch_info=info)


def _relabeler(k=1e9, reward_fn=goal_reward):
    return HindsightRelabeler(OBS_SPEC, relabel_ratio_k=k, reward_fn=reward_fn)


@pytest.mark.parametrize("L", [2, 4])
def test_future_goals_come_from_the_same_episode_at_or_after_the_last_step(L):
    buffer = filled_buffer()
    exp = _sample(buffer, L=L)
    out = _relabeler().transform_experience(exp)
    info = exp.batch_info
    ag, dg = exp.time_step.observation["achieved_goal"], exp.time_step.observation["desired_goal"]
    new_dg = out.time_step.observation["desired_goal"]
    drawn = {}
    for b in range(exp.time_step.step_type.shape[0]):
        row, p = int(info.env_ids[b]), int(info.positions[b])
        end = ENDS[row][p]
        steps = [p + j for j in range(L)]
        if end == p:  # starts at its episode's LAST step: no transition, kept as stored
            assert torch.equal(new_dg[b], dg[b])
            continue
        source = int(new_dg[b, 0, 0]) - 100 * row  # achieved_goal names its position
        assert min(p + L - 1, end) <= source <= end, (row, p, source)
        for j, step in enumerate(steps):
            if step <= end:  # same episode: relabeled, reward recomputed
                assert new_dg[b, j].tolist() == [100 * row + source, 0.0]
                expected = 0.0 if step == source else -1.0
                assert out.time_step.reward[b, j].item() == expected
            else:  # the next episode: as stored
                assert torch.equal(new_dg[b, j], dg[b, j])
                assert out.time_step.reward[b, j] == exp.time_step.reward[b, j]
        drawn.setdefault((row, p), set()).add(source)
    # every allowed future step is drawn for a start sampled often enough (uniform draw)
    assert drawn[(1, 0)] == set(range(L - 1, 10))
    # the batch's other fields, and the input, are untouched
    assert torch.equal(out.time_step.observation["achieved_goal"], ag)
    assert out.batch_info is exp.batch_info
    assert torch.equal(exp.time_step.observation["desired_goal"], dg)


def test_relabel_fraction_is_k_over_k_plus_one():
    buffer = filled_buffer()
    exp = _sample(buffer, B=4000)
    relabeler = _relabeler(k=4)
    assert relabeler.relabel_fraction == pytest.approx(0.8)
    out = relabeler.transform_experience(exp)
    dg, new_dg = exp.time_step.observation["desired_goal"], out.time_step.observation[
        "desired_goal"]
    starts_at_end = torch.tensor([ENDS[int(r)][int(p)] == int(p) for r, p in
                                  zip(exp.batch_info.env_ids, exp.batch_info.positions)])
    changed = (new_dg[:, 0] != dg[:, 0]).any(-1)
    share = float(changed[~starts_at_end].float().mean())
    assert abs(share - 0.8) < 0.03, share


def test_k_zero_returns_the_batch_unchanged():
    exp = _sample(filled_buffer())
    assert _relabeler(k=0).transform_experience(exp) is exp


def test_preprocess_sampled_relabels_through_a_sequential_transformer():
    """The Learner's path: preprocess_sampled -> data_transformer.transform_experience."""
    buffer = filled_buffer()
    exp = _sample(buffer)
    seq = SequentialDataTransformer(
        [IdentityDataTransformer, lambda observation_spec: _relabeler()], OBS_SPEC)

    class Alg:
        data_transformer = seq

        def preprocess_experience(self, experience):
            assert experience.batch_info == ()
            return experience

    out = preprocess_sampled(Alg(), exp)
    assert not torch.equal(out.time_step.observation["desired_goal"],
                           exp.time_step.observation["desired_goal"])
    assert out.batch_info is exp.batch_info


def test_bad_specs_and_sources_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="'achieved_goal' and 'desired_goal'.*got "
                       r"\['desired_goal', 'observation'\]") as e:
        HindsightRelabeler({"observation": TensorSpec((3,)), "desired_goal": TensorSpec((2,))},
                           reward_fn=goal_reward)
    assert "use a goal env" in str(e.value).splitlines()[0]  # gin may append its call site
    with pytest.raises(ConfigError, match="same shape"):
        HindsightRelabeler({"achieved_goal": TensorSpec((3,)), "desired_goal": TensorSpec((2,))},
                           reward_fn=goal_reward)
    with pytest.raises(ConfigError, match="relabel_ratio_k must be >= 0"):
        _relabeler(k=-1)
    exp = _sample(filled_buffer())
    with pytest.raises(ConfigError, match="online replay buffer"):
        _relabeler().transform_experience(exp._replace(batch_info=BatchInfo()))


def test_goal_env_reward_calls_the_env_compute_reward_and_pickles_without_the_env():
    fn = GoalEnvReward(BIT_FLIPPING, {"n_bits": 3})
    achieved = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    desired = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    assert fn(achieved, desired).tolist() == [0.0, -1.0]
    copy = pickle.loads(pickle.dumps(fn))
    assert copy._fn is None and copy(achieved, desired).tolist() == [0.0, -1.0]
    with pytest.raises(ConfigError, match="CartPole-v1 has no compute_reward"):
        GoalEnvReward("CartPole-v1").check()


def test_default_reward_fn_is_the_configured_env_compute_reward():
    import gin
    gin.clear_config()
    try:
        gin.parse_config(['create_environment.env_name = "%s"' % BIT_FLIPPING,
                          'create_environment.env_kwargs = {"n_bits": 2}'])
        relabeler = HindsightRelabeler(OBS_SPEC)
        assert relabeler._reward_fn.env_name == BIT_FLIPPING
        assert relabeler._reward_fn(torch.ones(1, 2), torch.zeros(1, 2)).tolist() == [-1.0]
    finally:
        gin.clear_config()


def test_bit_flipping_env_rewards_terminates_and_truncates():
    env = gym.make(BIT_FLIPPING, n_bits=4)
    obs, _ = env.reset(seed=1)
    assert sorted(obs) == ["achieved_goal", "desired_goal", "observation"]
    assert not (obs["achieved_goal"] == obs["desired_goal"]).all()
    differing = [i for i in range(4) if obs["achieved_goal"][i] != obs["desired_goal"][i]]
    for n, i in enumerate(differing):
        obs, reward, terminated, truncated, info = env.step(i)
        last = n == len(differing) - 1
        assert (reward, terminated, truncated, info["is_success"]) == \
            ((0.0, True, False, True) if last else (-1.0, False, False, False))
    env.reset(seed=2)
    results = [env.step(0)[1:4] for _ in range(4)]  # flips one bit back and forth
    assert results[-1] == (-1.0, False, True) and all(r[0] == -1.0 for r in results)


def test_an_env_without_compute_reward_is_refused_at_construction():
    """Not at the first sampled batch, after the run has started writing (a bug once:
    only the default GoalEnvReward was checked)."""
    with pytest.raises(ConfigError, match="CartPole-v1 has no compute_reward"):
        HindsightRelabeler(OBS_SPEC, reward_fn=GoalEnvReward("CartPole-v1"))


def test_an_episode_cut_without_a_last_step_ends_before_the_next_first():
    """A run resumed with its replay buffer restarts its envs: the interrupted episode's
    last stored step is MID and a FIRST follows. Its end is the step before that FIRST,
    so no goal is taken from the next episode."""
    from alf.data_structures import StepType
    buffer = filled_buffer()
    # row 1 becomes F M M M (cut) F M M M M M: overwrite step type 4 of row 1 with FIRST
    slot = buffer._flat_storage.time_step.step_type
    slot[1 * buffer.max_length + 4] = StepType.FIRST
    ends = episode_ends(buffer, torch.tensor([1] * 6), torch.tensor([0, 1, 3, 4, 5, 9]),
                        window=2)
    assert ends.tolist() == [3, 3, 3, 9, 9, 9]
