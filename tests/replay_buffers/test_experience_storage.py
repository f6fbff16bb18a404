"""Derived fields: what a real environment produced as ``prev_action``/``env_id`` is rebuilt
exactly from a buffer that does not store them (sampled batches and gather_all)."""
import pytest
import torch

from alf import nest
from alf.data_structures import Experience, StepType
from alf.environments import create_environment
from alf.replay_buffers import ReplayBuffer
from alf.replay_buffers.experience_storage import (gather_all_positions, restore_derived_fields,
                                                   storage_spec, to_storage)
from alf.tensor_specs import extract_spec, nbytes


def _record(env_name: str, num_envs: int, steps: int, action_fn, **env_kwargs):
    """Time-major full Experience [T, B] (as the unroller builds it) from a real env."""
    exps = []
    with create_environment(env_name, num_envs, backend="sync", seed=0, **env_kwargs) as env:
        ts = env.reset()
        for t in range(steps):
            action = action_fn(t, num_envs)
            exps.append(Experience(time_step=ts, action=action))
            ts = env.step(action)
        prev_action_spec = env.time_step_spec().prev_action
    return nest.stack(exps), prev_action_spec


def _pendulum(steps=23, num_envs=2):
    gen = torch.Generator().manual_seed(0)
    # 3x the bounds: the env clips, prev_action keeps the agent's own (unclipped) action
    return _record("Pendulum-v1", num_envs, steps,
                   lambda t, b: 3 * torch.randn(b, 1, generator=gen), max_episode_steps=5)


def test_storage_spec_drops_prev_action_and_env_id():
    full, _ = _pendulum(steps=2)
    spec = extract_spec(full, 2)
    stored = storage_spec(spec)
    assert stored.time_step.prev_action == () and stored.time_step.env_id == ()
    assert stored.time_step.observation == spec.time_step.observation
    assert nbytes(spec) - nbytes(stored) == 4 + 8  # a float32 [1] action and an int64 env id
    data = to_storage(full)
    assert data.time_step.prev_action == () and data.action is full.action


def _buffer_with(full: Experience, capacity: int, chunk: int = 4) -> ReplayBuffer:
    buf = ReplayBuffer(storage_spec(extract_spec(full, 2)), full.action.shape[1], capacity)
    T = full.action.shape[0]
    for t0 in range(0, T, chunk):
        part = nest.map_structure(lambda x: x[t0:t0 + chunk], full)
        buf.add_sequence(to_storage(part), part.time_step.env_id[0])
    return buf


def _truth(full: Experience, env_ids, positions, L):
    """What the env produced at (env, position + 0..L-1): [B, L, ...]."""
    t = positions[:, None] + torch.arange(L)[None, :]
    return full.time_step.prev_action[t, env_ids[:, None]], full.time_step.env_id[t, env_ids[:, None]]


def test_sampled_batches_get_exactly_the_env_prev_action_and_env_id():
    full, prev_spec = _pendulum(steps=23)
    assert (full.time_step.step_type == StepType.FIRST).sum() >= 8  # several resets (truncation)
    buf = _buffer_with(full, capacity=9)  # wraps: positions 14..22 stored
    gen = torch.Generator().manual_seed(1)
    oldest = 23 - 9
    seen_oldest = False
    for _ in range(20):
        data, info = buf.get_batch(32, 3, generator=gen)
        out = restore_derived_fields(buf, data, info.env_ids, info.positions, prev_spec)
        prev, env_id = _truth(full, info.env_ids, info.positions, 3)
        assert out.time_step.env_id.dtype == torch.int64
        assert torch.equal(out.time_step.env_id, env_id)
        assert out.time_step.prev_action.dtype == prev_spec.dtype
        at_oldest = info.positions == oldest  # the previous step was overwritten
        seen_oldest |= bool(at_oldest.any())
        assert torch.equal(out.time_step.prev_action[~at_oldest], prev[~at_oldest])
        assert torch.equal(out.time_step.prev_action[at_oldest, 1:], prev[at_oldest, 1:])
        assert bool((out.time_step.prev_action[at_oldest, 0] == 0).all())
        assert torch.equal(out.time_step.observation, data.time_step.observation)
    assert seen_oldest
    assert bool((full.time_step.prev_action.abs() > 2).any())  # unclipped values were stored


def test_gather_all_and_keep_last_clear():
    full, prev_spec = _pendulum(steps=16)
    buf = _buffer_with(full, capacity=16, chunk=8)
    env_ids, positions = gather_all_positions(buf)
    assert env_ids.tolist() == [0, 1] and positions.tolist() == [0, 0]
    out = restore_derived_fields(buf, buf.gather_all(), env_ids, positions, prev_spec)
    prev, env_id = _truth(full, env_ids, positions, 16)
    assert torch.equal(out.time_step.prev_action, prev)  # position 0 is FIRST: zeros
    assert torch.equal(out.time_step.env_id, env_id)
    # whole-buffer training: keep the newest step, add the next unroll
    more, _ = _pendulum(steps=24)
    buf.clear(keep_last=True)
    part = nest.map_structure(lambda x: x[16:24], more)
    buf.add_sequence(to_storage(part), part.time_step.env_id[0])
    env_ids, positions = gather_all_positions(buf)
    assert positions.tolist() == [15, 15]
    out = restore_derived_fields(buf, buf.gather_all(), env_ids, positions, prev_spec)
    prev, _ = _truth(more, env_ids, positions, 9)
    # step 14 was cleared but its slot is not overwritten yet: the kept step 15 still
    # gets its true prev_action
    assert torch.equal(out.time_step.prev_action, prev)


def test_discrete_actions_with_terminations():
    gen = torch.Generator().manual_seed(2)
    full, prev_spec = _record("CartPole-v1", 3, 60,
                              lambda t, b: torch.randint(0, 2, (b,), generator=gen))
    assert bool((full.time_step.discount == 0).any())  # at least one termination
    buf = _buffer_with(full, capacity=60, chunk=20)
    data, info = buf.get_batch(200, 4, generator=gen)
    out = restore_derived_fields(buf, data, info.env_ids, info.positions, prev_spec)
    prev, env_id = _truth(full, info.env_ids, info.positions, 4)
    assert out.time_step.prev_action.dtype == torch.int64
    assert torch.equal(out.time_step.prev_action, prev)
    assert torch.equal(out.time_step.env_id, env_id)


@pytest.mark.parametrize("prioritized", [False, True])
def test_restore_works_for_both_sampling_modes(prioritized):
    full, prev_spec = _pendulum(steps=12)
    buf = ReplayBuffer(storage_spec(extract_spec(full, 2)), 2, 12, prioritized=prioritized)
    buf.add_sequence(to_storage(full), full.time_step.env_id[0])
    data, info = buf.get_batch(16, 2, generator=torch.Generator().manual_seed(3))
    out = restore_derived_fields(buf, data, info.env_ids, info.positions, prev_spec)
    prev, env_id = _truth(full, info.env_ids, info.positions, 2)
    assert torch.equal(out.time_step.prev_action, prev)
    assert torch.equal(out.time_step.env_id, env_id)
