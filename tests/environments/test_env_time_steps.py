"""TimeStep semantics of create_environment across backends (termination, truncation, resets)."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from alf.data_structures import StepType, TimeStep
from alf.environments import create_environment
from alf import nest

FIRST, MID, LAST = StepType.FIRST, StepType.MID, StepType.LAST
BACKENDS = ["vector", "sync", "async"]


def _check_against_spec(ts: TimeStep, spec: TimeStep, batch_size: int):
    nest.assert_same_structure(ts, spec)
    for t, s in zip(nest.flatten(ts), nest.flatten(spec)):
        assert t.dtype == s.dtype, (t.dtype, s)
        assert tuple(t.shape) == (batch_size,) + tuple(s.shape), (t.shape, s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_and_step_match_specs(backend):
    with create_environment("CartPole-v1", 3, backend=backend, seed=3) as env:
        assert env.batch_size == 3 and env.env_name == "CartPole-v1"
        spec = env.time_step_spec()
        assert spec.prev_action == env.action_spec()
        assert env.reward_spec().shape == () and env.reward_spec().dtype == torch.float32
        ts = env.reset()
        _check_against_spec(ts, spec, 3)
        assert (ts.step_type == FIRST).all()
        assert (ts.reward == 0).all() and (ts.discount == 1).all()
        assert (ts.prev_action == 0).all()
        assert torch.equal(ts.env_id, torch.arange(3))
        assert ts.env_info == {}
        ts = env.step(torch.tensor([0, 1, 0]))
        _check_against_spec(ts, spec, 3)
        assert (ts.step_type == MID).all()
        assert torch.equal(ts.prev_action, torch.tensor([0, 1, 0]))


def test_backends_give_same_specs_and_sync_async_same_values():
    envs = [create_environment("CartPole-v1", 2, backend=b, seed=7) for b in BACKENDS]
    try:
        specs = [e.time_step_spec() for e in envs]
        assert specs[0] == specs[1] == specs[2]
        steps = [[e.reset()] for e in envs]
        gen = torch.Generator().manual_seed(0)
        for _ in range(40):
            a = torch.randint(0, 2, (2,), generator=gen)
            for e, s in zip(envs, steps):
                s.append(e.step(a))
        for per_backend in steps:
            for ts in per_backend:
                _check_against_spec(ts, specs[0], 2)
        # sync and async build the very same seeded sub-envs
        for ts_sync, ts_async in zip(steps[1], steps[2]):
            for x, y in zip(nest.flatten(ts_sync), nest.flatten(ts_async)):
                assert torch.equal(x, y)
    finally:
        for e in envs:
            e.close()


@pytest.mark.parametrize("backend", ["vector", "sync"])
def test_termination_gives_last_discount0_then_first(backend):
    """Pushing CartPole right makes the pole fall: LAST/discount 0, then FIRST/reward 0."""
    with create_environment("CartPole-v1", 4, backend=backend, seed=0) as env:
        prev = env.reset()
        push = torch.ones(4, dtype=torch.int64)
        seen_last = np.zeros(4, bool)
        seen_restart = np.zeros(4, bool)
        for _ in range(60):
            ts = env.step(push)
            for i in range(4):
                if prev.step_type[i] == LAST:
                    assert ts.step_type[i] == FIRST
                    assert ts.reward[i] == 0 and ts.discount[i] == 1
                    assert ts.prev_action[i] == 0  # the action at LAST was ignored
                    seen_restart[i] = True
                elif ts.step_type[i] == LAST:
                    assert ts.discount[i] == 0 and ts.reward[i] == 1
                    assert abs(ts.observation[i, 2]) > 0.2 or abs(ts.observation[i, 0]) > 2.4
                    seen_last[i] = True
                else:
                    assert ts.step_type[i] == MID
                    assert ts.discount[i] == 1 and ts.reward[i] == 1
                    assert ts.prev_action[i] == 1
            prev = ts
        assert seen_last.all() and seen_restart.all()


@pytest.mark.parametrize("backend", ["vector", "sync"])
def test_truncation_keeps_final_observation_and_discount1(backend):
    seed = 11
    with create_environment("CartPole-v1", 2, backend=backend, seed=seed, max_episode_steps=5) as env:
        actions = [torch.tensor([i % 2, (i + 1) % 2]) for i in range(12)]
        ts = [env.reset()] + [env.step(a) for a in actions]
    types = torch.stack([t.step_type for t in ts])[:, 0].tolist()
    assert types == [FIRST, MID, MID, MID, MID, LAST, FIRST, MID, MID, MID, MID, LAST, FIRST]
    last, first = ts[5], ts[6]
    assert (last.discount == 1).all() and (last.reward == 1).all()
    assert (first.reward == 0).all() and (first.discount == 1).all()
    assert (first.prev_action == 0).all()
    assert not torch.equal(last.observation, first.observation)
    if backend == "sync":
        # the LAST observation is the env's real final observation, not the reset one
        ref = gym.make("CartPole-v1", max_episode_steps=5)
        obs, _ = ref.reset(seed=seed)
        for a in actions[:5]:
            obs, _, _, truncated, _ = ref.step(int(a[0]))
        assert truncated
        np.testing.assert_array_equal(last.observation[0].numpy(), obs)


def test_continuous_actions_spec_and_clipping():
    with create_environment("Pendulum-v1", 2, seed=5) as env, \
            create_environment("Pendulum-v1", 2, seed=5) as ref:
        spec = env.action_spec()
        assert spec.shape == (1,) and spec.dtype == torch.float32
        np.testing.assert_array_equal(spec.minimum, [-2.0]) and np.testing.assert_array_equal(spec.maximum, [2.0])
        obs_spec = env.observation_spec()
        assert obs_spec.dtype == torch.float32
        np.testing.assert_array_equal(obs_spec.maximum, [1.0, 1.0, 8.0])
        env.reset(), ref.reset()
        big = torch.tensor([[100.0], [-100.0]])
        ts = env.step(big)
        ts_ref = ref.step(torch.tensor([[2.0], [-2.0]]))
        assert torch.equal(ts.observation, ts_ref.observation)  # clipped env-side
        assert torch.equal(ts.reward, ts_ref.reward)
        assert torch.equal(ts.prev_action, big)  # the agent's choice, unclipped
        # float64 / numpy actions are accepted too
        ts = env.step(np.array([[0.5], [0.5]], dtype=np.float64))
        assert ts.prev_action.dtype == torch.float32


def test_prev_action_is_a_copy_and_int32_actions_accepted():
    with create_environment("CartPole-v1", 2, backend="vector") as env:
        env.reset()
        a = torch.tensor([1, 0], dtype=torch.int32)
        ts = env.step(a)
        a[0] = 0
        assert ts.prev_action.dtype == torch.int64
        assert ts.prev_action.tolist() == [1, 0]


def test_step_before_reset_and_after_close_raise():
    env = create_environment("CartPole-v1", 1, backend="vector")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(1, dtype=torch.int64))
    env.close()
    env.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


@pytest.mark.parametrize("backend", ["vector", "sync"])
def test_render_rgb_array(backend):
    with create_environment("CartPole-v1", 2, backend=backend, render_mode="rgb_array") as env:
        env.reset()
        frame = env.render()
        assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
        assert frame.ndim == 3 and frame.shape[2] == 3
    with create_environment("CartPole-v1", 1) as env:
        env.reset()
        assert env.render() is None


def test_enforced_and_trusted_autoreset_paths_agree():
    """The defensive path for unknown vector envs gives the same TimeSteps as the fast one."""
    from alf.environments.gym_environment import GymVectorEnvironment

    def make(enforce):
        vec = gym.make_vec("CartPole-v1", 4, vectorization_mode="vector_entry_point")
        return GymVectorEnvironment(vec, "CartPole-v1", seed=2, copy_observations=enforce,
                                    enforce_autoreset=enforce)

    fast, strict = make(False), make(True)
    try:
        a, b = fast.reset(), strict.reset()
        push = torch.ones(4, dtype=torch.int64)
        n_first = 0
        for _ in range(40):
            a, b = fast.step(push), strict.step(push)
            for x, y in zip(nest.flatten(a), nest.flatten(b)):
                assert torch.equal(x, y)
            n_first += int((a.step_type == FIRST).sum())
        assert n_first > 0
    finally:
        fast.close(), strict.close()
