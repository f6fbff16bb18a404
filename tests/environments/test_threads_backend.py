"""The "threads" backend: the "sync" backend's time steps, with the sub-env steps run
concurrently on one thread per env (waits overlap), its threads reaped on close, and a
sub-env's exception raised in the caller."""
import functools
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from alf.data_structures import StepType
from alf.environments import StepLatencyWrapper, create_environment
from alf.environments.thread_vector_env import ThreadVectorEnv
from alf.errors import EnvRaisedError


def _latency(seconds: float):
    return functools.partial(StepLatencyWrapper, latency_s=seconds)


def _fields(ts):
    return (ts.observation, ts.reward, ts.step_type, ts.discount, ts.env_id, ts.prev_action)


def test_same_time_steps_as_sync_across_episode_ends():
    """Same seeds and actions, 200 steps over many episode ends (terminations and
    max_episode_steps truncations), half of them through step_async/step_wait."""
    num_envs, kwargs = 4, dict(seed=7, max_episode_steps=15, env_id_offset=3)
    actions = torch.from_numpy(np.random.default_rng(0).integers(0, 2, (200, num_envs)))
    with create_environment("CartPole-v1", num_envs, backend="sync", **kwargs) as sync, \
            create_environment("CartPole-v1", num_envs, backend="threads", **kwargs) as threads:
        assert type(threads.gym_env) is ThreadVectorEnv and threads.has_background_step
        pairs = [(sync.reset(), threads.reset())]
        for i, action in enumerate(actions):
            if i % 2:
                threads.step_async(action)
                pairs.append((sync.step(action), threads.step_wait()))
            else:
                pairs.append((sync.step(action), threads.step(action)))
    for a, b in pairs:
        for x, y in zip(_fields(a), _fields(b)):
            torch.testing.assert_close(x, y, rtol=0, atol=0)
    step_types = torch.stack([a.step_type for a, _ in pairs])
    discounts = torch.stack([a.discount for a, _ in pairs])
    assert (step_types == StepType.LAST).sum() >= 20  # many episode ends, both kinds:
    assert ((step_types == StepType.LAST) & (discounts == 0)).any()  # terminated
    assert ((step_types == StepType.LAST) & (discounts == 1)).any()  # truncated
    assert pairs[0][1].env_id.tolist() == [3, 4, 5, 6]


def test_sixteen_latency_bound_envs_wait_concurrently():
    """16 envs of 20 ms: one batched step takes about one latency, not 16 (0.32 s)."""
    seconds = {}
    for backend in ("sync", "threads"):
        with create_environment("CartPole-v1", 16, backend=backend, seed=0,
                                gym_wrappers=[_latency(0.02)]) as env:
            env.reset()
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                env.step(torch.zeros(16, dtype=torch.int64))
                times.append(time.perf_counter() - t0)
            seconds[backend] = sorted(times)[1]  # the median
    assert seconds["sync"] >= 16 * 0.02
    assert seconds["threads"] < 0.2, seconds


def test_step_async_returns_at_once_and_the_wait_overlaps_the_callers_work():
    with create_environment("CartPole-v1", 4, backend="threads", seed=0,
                            gym_wrappers=[_latency(0.2)]) as env:
        env.reset()
        t0 = time.perf_counter()
        env.step_async(torch.zeros(4, dtype=torch.int64))
        sent = time.perf_counter() - t0
        with pytest.raises(RuntimeError, match="pending"):
            env.render()
        time.sleep(0.2)  # the caller's own work, while the envs wait
        t1 = time.perf_counter()
        ts = env.step_wait()
        waited = time.perf_counter() - t1
    assert sent < 0.1 and waited < 0.1, (sent, waited)
    assert ts.step_type.tolist() == [StepType.MID] * 4


def test_close_reaps_the_threads():
    before = threading.active_count()
    env = create_environment("CartPole-v1", 8, backend="threads", seed=0,
                             gym_wrappers=[_latency(0.01)])
    env.reset()
    env.step(torch.ones(8, dtype=torch.int64))
    # at most one thread per env: the pool starts one per waiting env, but reuses one that
    # went idle before the next submit (seen on a loaded machine: 7 of 8)
    assert before < threading.active_count() <= before + 8
    env.step_async(torch.ones(8, dtype=torch.int64))  # a pending step is waited for, then dropped
    env.close()
    assert threading.active_count() == before
    assert env.gym_env.closed


class _StepError(Exception):
    pass


class _FailOnThirdStep(gym.Wrapper):
    """Raises :class:`_StepError` from its third ``step``."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 3:
            raise _StepError(f"step {self.steps}")
        return self.env.step(action)


@pytest.mark.parametrize("split", [False, True])
def test_a_raising_env_step_raises_in_the_caller(split):
    before = threading.active_count()
    env = create_environment("CartPole-v1", 3, backend="threads", seed=0,
                             gym_wrappers=[_FailOnThirdStep])
    env.reset()
    action = torch.zeros(3, dtype=torch.int64)
    env.step(action)
    env.step(action)
    # the env's own exception, named (env, index, step) by EnvErrorWrapper, its cause kept
    with pytest.raises(EnvRaisedError, match=r"^Environment 'CartPole-v1' env 0 \(of 3\): "
                       r"step\(\) at its step 3 raised _StepError: step 3$") as raised:
        if split:
            env.step_async(action)  # starting the step does not raise
            env.step_wait()
        else:
            env.step(action)
    assert isinstance(raised.value.__cause__, _StepError)
    env.close()
    assert threading.active_count() == before


def test_render_and_auto_never_picks_threads():
    with create_environment("CartPole-v1", 2, backend="threads", seed=0,
                            render_mode="rgb_array") as env:
        env.reset()
        env.step(torch.zeros(2, dtype=torch.int64))
        frame = env.render()
        assert frame.shape == (400, 600, 3) and frame.dtype == np.uint8
    with create_environment("CartPole-v1", 2, gym_wrappers=[_latency(0.0)]) as env:
        assert type(env.gym_env) is gym.vector.SyncVectorEnv  # "auto": still "sync"


def test_thread_vector_env_is_syncvectorenv_with_parallel_reset():
    """Direct use: the gymnasium API, resets concurrent too, only NEXT_STEP autoreset."""
    fns = [lambda: StepLatencyWrapper(gym.make("CartPole-v1"), 0.0, reset_latency_s=0.1)] * 4
    env = ThreadVectorEnv(fns)
    try:
        t0 = time.perf_counter()
        obs, _ = env.reset(seed=1)
        assert time.perf_counter() - t0 < 0.3  # 4 x 0.1 s serially
        ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)
        np.testing.assert_array_equal(obs, ref.reset(seed=1)[0])
        ref.close()
        assert env.get_attr("reset_latency_s") == (0.1,) * 4
    finally:
        env.close()
    with pytest.raises(ValueError, match="NEXT_STEP"):
        ThreadVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
