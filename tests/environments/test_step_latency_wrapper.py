"""StepLatencyWrapper: each step waits (sleeps) the latency and changes nothing else,
alone and through create_environment's per-env backends (sync, threads, async); the native
vector backend refuses it."""
import pickle
import time

import gin
import gymnasium as gym
import numpy as np
import pytest
import torch

from alf.environments import StepLatencyWrapper, create_environment
from alf.errors import UserError


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def test_step_and_reset_wait_the_latency():
    env = StepLatencyWrapper(gym.make("CartPole-v1"), latency_s=0.02, reset_latency_s=0.03)
    _, reset_s = _timed(lambda: env.reset(seed=0))
    assert reset_s >= 0.03
    for _ in range(3):
        _, step_s = _timed(env.step, 0)
        assert step_s >= 0.02
    assert StepLatencyWrapper(gym.make("CartPole-v1")).latency_s == 0.01  # the default


def test_same_observations_and_rewards_as_the_unwrapped_env():
    plain = gym.make("CartPole-v1")
    wrapped = pickle.loads(pickle.dumps(StepLatencyWrapper(gym.make("CartPole-v1"),
                                                           latency_s=0.001)))
    obs_a, _ = plain.reset(seed=3)
    obs_b, _ = wrapped.reset(seed=3)
    np.testing.assert_array_equal(obs_a, obs_b)
    actions = np.random.default_rng(0).integers(0, 2, 40)
    for a in actions:
        out_a, out_b = plain.step(int(a)), wrapped.step(int(a))
        np.testing.assert_array_equal(out_a[0], out_b[0])
        assert out_a[1:4] == out_b[1:4]  # reward, terminated, truncated
        if out_a[2] or out_a[3]:
            np.testing.assert_array_equal(plain.reset(seed=4)[0], wrapped.reset(seed=4)[0])


@pytest.mark.parametrize("bad", [-0.01, float("nan")])
def test_bad_latency_is_a_user_error(bad):
    with pytest.raises(UserError, match="latency_s must be >= 0"):
        StepLatencyWrapper(gym.make("CartPole-v1"), latency_s=bad)


def _steps(env, n: int):
    """``n + 1`` time steps (reset, then fixed actions) and the seconds of each step."""
    out, seconds = [env.reset()], []
    for i in range(n):
        ts, s = _timed(env.step, torch.full((env.batch_size,), i % 2))
        out.append(ts)
        seconds.append(s)
    return out, seconds


@pytest.mark.parametrize("backend", ["sync", "threads", "async"])
def test_through_create_environment_and_gin(backend):
    """Bound in gin (so the async backend's subprocesses get the latency too): the sync
    backend waits for its envs one after another, the threads and async ones for all at
    once; the time steps are the unwrapped env's."""
    latency, num_envs = 0.04, 3
    gin.clear_config()
    try:
        gin.parse_config(f"create_environment.gym_wrappers = [@StepLatencyWrapper]\n"
                         f"StepLatencyWrapper.latency_s = {latency}")
        with create_environment("CartPole-v1", num_envs, backend=backend, seed=5) as env:
            wrapped, seconds = _steps(env, 3)
    finally:
        gin.clear_config()
    with create_environment("CartPole-v1", num_envs, backend="sync", seed=5) as env:
        plain, _ = _steps(env, 3)
    for a, b in zip(plain, wrapped):
        torch.testing.assert_close(a.observation, b.observation, rtol=0, atol=0)
        torch.testing.assert_close(a.reward, b.reward, rtol=0, atol=0)
    if backend == "sync":
        assert min(seconds) >= num_envs * latency
    else:  # the envs wait concurrently (a generous bound: the machine may be busy)
        assert min(seconds) >= latency and sorted(seconds)[1] < num_envs * latency


def test_vector_backend_refuses_gym_wrappers_and_auto_picks_sync():
    with pytest.raises(UserError, match="gym_wrappers"):
        create_environment("CartPole-v1", 2, backend="vector",
                           gym_wrappers=[StepLatencyWrapper])
    with create_environment("CartPole-v1", 2, gym_wrappers=[StepLatencyWrapper]) as env:
        assert isinstance(env.gym_env, gym.vector.SyncVectorEnv)
