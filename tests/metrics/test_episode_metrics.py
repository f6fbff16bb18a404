"""EpisodeMetrics on a hand-made stream: per-step and per-sequence updates agree."""
import math

import pytest
import torch

from alf.data_structures import StepType, TimeStep
from alf.metrics import EpisodeMetrics

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST

# [T=6, B=3] time-major. Rewards at FIRST steps are deliberately non-zero: they must be ignored.
STEP_TYPES = torch.tensor([
    # env0 env1 env2
    [F, M, F],
    [M, M, M],
    [M, L, M],  # env1: episode (started before the stream) ends: 1 + 1 + 1 = 3, length 3
    [L, F, M],  # env0: 1 + 2 + 3 = 6, length 3
    [F, M, M],
    [M, L, M],  # env1: 2 + 4 = 6, length 2
], dtype=torch.int32)
REWARDS = torch.tensor([
    [100., 1., 100.],
    [1., 1., 1.],
    [2., 1., 1.],
    [3., 100., 1.],
    [100., 2., 1.],
    [5., 4., 1.],
])
FINISHED = {2: [3.0], 3: [6.0], 5: [6.0]}  # step -> returns of the episodes that ended there


def _per_step(metrics, step_types=STEP_TYPES, rewards=REWARDS):
    out = {}
    for t in range(step_types.shape[0]):
        done = metrics.update(TimeStep(step_type=step_types[t], reward=rewards[t]))
        if done:
            out[t] = done
    return out


def test_update_reports_finished_episodes_and_ignores_first_rewards():
    m = EpisodeMetrics(3, buffer_size=20)
    assert _per_step(m) == FINISHED
    assert m.num_episodes == 3 and m.num_env_steps == 18
    assert m.average_return() == pytest.approx((3 + 6 + 6) / 3)
    assert m.average_length() == pytest.approx((3 + 3 + 2) / 3)
    # the unfinished episodes carry on: env0 has 5 so far (length 1), env2 has 5 (length 5)
    assert m._returns.tolist() == [5.0, 0.0, 5.0] and m._lengths.tolist() == [1, 0, 5]


def test_update_sequence_agrees_with_update():
    a, b, c = EpisodeMetrics(3, 20), EpisodeMetrics(3, 20), EpisodeMetrics(3, 20)
    _per_step(a)
    b.update_sequence(STEP_TYPES, REWARDS)
    c.update_sequence(STEP_TYPES[:4], REWARDS[:4])  # split across two unrolls
    c.update_sequence(STEP_TYPES[4:], REWARDS[4:])
    for m in (b, c):
        assert m.state_dict() == a.state_dict()
        assert m._returns.tolist() == a._returns.tolist()
        assert m._lengths.tolist() == a._lengths.tolist()


def test_average_is_over_the_window_of_recent_episodes():
    for update in ("update", "update_sequence"):
        m = EpisodeMetrics(3, buffer_size=2)
        if update == "update":
            _per_step(m)
        else:
            m.update_sequence(STEP_TYPES, REWARDS)
        assert m.num_episodes == 3  # counts all, averages the newest 2
        assert m.average_return() == pytest.approx((6 + 6) / 2)
        assert m.average_length() == pytest.approx((3 + 2) / 2)


def test_multi_dimensional_rewards_are_summed():
    rewards = torch.stack([REWARDS, 2 * REWARDS], -1)  # [T, B, 2]: total is 3x
    a, b = EpisodeMetrics(3), EpisodeMetrics(3)
    _per_step(a, rewards=rewards)
    b.update_sequence(STEP_TYPES, rewards)
    assert a.average_return() == pytest.approx(3 * 5.0)
    assert b.state_dict() == a.state_dict()


def test_no_episode_yet_and_state_dict_round_trip():
    m = EpisodeMetrics(2)
    assert math.isnan(m.average_return()) and math.isnan(m.average_length())
    assert not m.has_episodes()
    full = EpisodeMetrics(3, buffer_size=2)
    full.update_sequence(STEP_TYPES, REWARDS)
    restored = EpisodeMetrics(3, buffer_size=2)
    restored.load_state_dict(full.state_dict())
    assert restored.state_dict() == full.state_dict() and restored.has_episodes()
    assert restored.average_return() == full.average_return()
