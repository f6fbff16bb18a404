"""The seams the async unroller stands on: split steps, env groups, thread caps, backend table.

- ``step_async(action)`` / ``step_wait()`` give exactly the TimeSteps of
  ``step(action)`` on every backend, also when the caller steps another env
  group in between and reuses its action buffer; misuse is a clear error.
- ``create_environment(..., env_id_offset=k)``: env ids ``k + i`` and seeds
  ``seed + k + i``, so two groups of 4 (offsets 0 and 4) are one group of 8.
- ``create_environment(..., num_threads=n)`` reaches the C++ thread pools.
- The built-in backends are an explicit table; importing registers nothing.
"""
import importlib.machinery
import multiprocessing
import subprocess
import sys
import time
import types

import gin
import gymnasium as gym
import numpy as np
import pytest
import torch

from alf import nest
from alf.data_structures import TimeStep
from alf.environments import (AlfEnvironment, AtariOptions, create_environment, register_backend,
                              unregister_backend)
from alf.environments import backends
from alf.environments.backends import (Backend, EnvRequest, async_env_backend, backend_names,
                                       builtin_backends, get_backend)
from alf.errors import UserError
from alf.tensor_specs import TensorSpec

BREAKOUT = "ALE/Breakout-v5"


def _actions(n_actions, batch, steps, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, n_actions, (batch,), generator=gen) for _ in range(steps)]


def _assert_same(a: TimeStep, b: TimeStep) -> None:
    for x, y in zip(nest.flatten(a), nest.flatten(b)):
        assert x.dtype == y.dtype and torch.equal(x, y)


def _split_rollout(env, actions, between=None):
    """reset, then for each action: step_async, [between()], scribble on the action, step_wait."""
    out = [env.reset()]
    for a in actions:
        buf = a.clone()
        env.step_async(buf)
        if between is not None:
            between()
        buf.fill_(0)  # the caller reuses its action buffer before step_wait
        out.append(env.step_wait())
    return out


# ---------------------------------------------------------------- step_async / step_wait
@pytest.mark.parametrize("backend", ["vector", "sync", "async"])
def test_split_step_is_bit_identical_to_step_cartpole(backend):
    actions = _actions(2, 3, 80)  # random CartPole actions end episodes within 80 steps
    with create_environment("CartPole-v1", 3, backend=backend, seed=11) as ref, \
            create_environment("CartPole-v1", 3, backend=backend, seed=11) as split, \
            create_environment("CartPole-v1", 2, backend=backend, seed=5,
                               env_id_offset=3) as other:
        expected = [ref.reset()] + [ref.step(a) for a in actions]
        other.reset()
        # the double-buffered pattern: the other group steps while this one is in flight
        got = _split_rollout(split, actions, between=lambda: other.step(torch.tensor([1, 0])))
    assert any((ts.step_type == 2).any() for ts in expected)  # episodes did end
    for e, g in zip(expected, got):
        _assert_same(e, g)


@pytest.mark.parametrize("options", [AtariOptions(), AtariOptions(grayscale=False, screen_size=64)],
                         ids=["grey", "rgb"])
def test_split_step_is_bit_identical_to_step_ale_vector(options):
    actions = _actions(4, 2, 60, seed=3)
    with create_environment(BREAKOUT, 2, backend="ale_vector", seed=2, atari=options,
                            num_threads=1) as ref, \
            create_environment(BREAKOUT, 2, backend="ale_vector", seed=2, atari=options,
                               num_threads=1) as split:
        assert split.has_background_step  # AtariVectorEnv.send / recv, not a stored action
        expected = [ref.reset()] + [ref.step(a) for a in actions]
        got = _split_rollout(split, actions)
    for e, g in zip(expected, got):
        _assert_same(e, g)


def test_native_splits_are_used():
    with create_environment("CartPole-v1", 2, backend="async") as a, \
            create_environment("CartPole-v1", 2, backend="sync") as s, \
            create_environment(BREAKOUT, 1, backend="ale_vector", num_threads=1) as ale:
        assert a.has_background_step and ale.has_background_step
        assert not s.has_background_step  # in-process loop: steps inside step_async


def test_ale_vector_step_async_returns_before_the_step_is_done():
    """``send`` only queues the actions: median ~0.1 ms against ~5 ms for a whole step (8 envs)."""
    with create_environment(BREAKOUT, 8, backend="ale_vector", seed=0, num_threads=1) as env:
        env.reset()
        sends, steps = [], []
        for a in _actions(4, 8, 20):
            start = time.perf_counter()
            env.step_async(a)
            sends.append(time.perf_counter() - start)
            env.step_wait()
            steps.append(time.perf_counter() - start)
    assert np.median(sends) < np.median(steps) / 4, (np.median(sends), np.median(steps))


class _SlowStep(gym.Wrapper):
    """Sleeps ``delay`` seconds in every ``step`` (a slow or hung env)."""

    def __init__(self, env, delay=1.0):
        super().__init__(env)
        self.delay = delay

    def step(self, action):
        time.sleep(self.delay)
        return self.env.step(action)


def test_async_step_async_returns_at_once_and_step_wait_honours_the_timeout():
    request = EnvRequest("CartPole-v1", num_envs=1, gym_wrappers=(_SlowStep,))
    env = async_env_backend(request, context="fork", step_timeout=0.2, close_timeout=3.0)
    try:
        env.reset()
        start = time.monotonic()
        env.step_async(torch.tensor([0]))
        assert time.monotonic() - start < 0.5  # the 1 s step runs in the worker
        with pytest.raises(multiprocessing.TimeoutError):
            env.step_wait()
        assert time.monotonic() - start < 0.9
    finally:
        env.close()
    assert multiprocessing.active_children() == []


class _Recording(AlfEnvironment):
    """A 2-env AlfEnvironment using the base split; ``step`` returns the action it got."""

    batch_size = 2
    env_name = "Recording"

    def __init__(self):
        self.actions = []

    def observation_spec(self):
        return TensorSpec((), torch.int64)

    def action_spec(self):
        return TensorSpec((), torch.int64)

    def _ts(self, obs):
        z = torch.zeros(2)
        return TimeStep(torch.ones(2, dtype=torch.int32), z, z + 1, obs, obs, torch.arange(2), {})

    def reset(self):
        self._check_no_pending_step("reset")
        return self._ts(torch.zeros(2, dtype=torch.int64))

    def step(self, action):
        self._check_no_pending_step("step")
        self.actions.append(action["a"].clone())
        return self._ts(action["a"].clone())

    def close(self):
        pass


def test_base_class_split_defers_step_and_copies_the_action():
    env = _Recording()
    env.reset()
    action = {"a": torch.tensor([3, 4])}
    env.step_async(action)
    assert env.actions == []  # the base default steps in step_wait
    action["a"].fill_(9)  # reused buffer: the stored action is a copy
    ts = env.step_wait()
    assert ts.observation.tolist() == [3, 4] and env.actions[0].tolist() == [3, 4]
    assert torch.equal(env.step({"a": torch.tensor([1, 2])}).observation, torch.tensor([1, 2]))


def _misuse_checks(env, action):
    name = type(env).__name__
    with pytest.raises(RuntimeError, match=r"step_wait\(\) called without a pending step_async"):
        env.step_wait()
    env.step_async(action)
    for call, method in [(lambda: env.step_async(action), "step_async"),
                         (lambda: env.step(action), "step"), (env.reset, "reset")]:
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == (f"{env!r}: {method}() called while a step_async() is pending; "
                                   "call step_wait() first."), name
    env.step_wait()  # the pending step is still there and completes
    with pytest.raises(RuntimeError, match="without a pending step_async"):
        env.step_wait()
    env.step(action)  # back to normal


def test_misuse_is_a_clear_runtime_error():
    env = _Recording()
    env.reset()
    _misuse_checks(env, {"a": torch.tensor([1, 1])})
    for backend, name, n in [("vector", "CartPole-v1", 2), ("async", "CartPole-v1", 2),
                             ("ale_vector", BREAKOUT, 1)]:
        kwargs = {"num_threads": 1} if backend == "ale_vector" else {}
        with create_environment(name, n, backend=backend, **kwargs) as env:
            with pytest.raises(RuntimeError, match=r"call reset\(\) before step_async"):
                env.step_async(torch.zeros(n, dtype=torch.int64))
            env.reset()
            _misuse_checks(env, torch.ones(n, dtype=torch.int64))


# ------------------------------------------------------------------- env groups (offsets)
def _groups_equal_one(env_name, backend, sizes, seed, steps, n_actions, **kwargs):
    """Two groups (offsets 0 and sizes[0]) step like one group of sum(sizes)."""
    total = sum(sizes)
    actions = _actions(n_actions, total, steps, seed=seed)
    with create_environment(env_name, total, backend=backend, seed=seed, **kwargs) as whole, \
            create_environment(env_name, sizes[0], backend=backend, seed=seed, **kwargs) as g0, \
            create_environment(env_name, sizes[1], backend=backend, seed=seed,
                               env_id_offset=sizes[0], **kwargs) as g1:
        assert (g0.env_id_offset, g1.env_id_offset) == (0, sizes[0])
        runs = [(whole.reset(), g0.reset(), g1.reset())]
        for a in actions:
            runs.append((whole.step(a), g0.step(a[:sizes[0]]), g1.step(a[sizes[0]:])))
    first = runs[0]
    assert first[1].env_id.tolist() == list(range(sizes[0]))
    assert first[2].env_id.tolist() == list(range(sizes[0], total))  # disjoint replay rows
    for w, a, b in runs:
        for x, y in zip(nest.flatten(w), nest.flatten(nest.map_structure(
                lambda u, v: torch.cat([u, v]), a, b))):
            assert torch.equal(x, y)


def test_two_cartpole_groups_are_one_group_sync():
    _groups_equal_one("CartPole-v1", "sync", (4, 4), seed=3, steps=30, n_actions=2)


def test_two_cartpole_groups_are_one_group_async():
    _groups_equal_one("CartPole-v1", "async", (1, 1), seed=8, steps=5, n_actions=2)


def test_two_breakout_groups_are_one_group_ale_vector():
    _groups_equal_one(BREAKOUT, "ale_vector", (4, 4), seed=5, steps=12, n_actions=4,
                      num_threads=1)


def test_cartpole_vector_groups_have_disjoint_ids_and_offset_seeds():
    """CartPole's native vector env has one RNG for its batch, seeded ``seed + offset``."""
    with create_environment("CartPole-v1", 4, backend="vector", seed=3) as g0, \
            create_environment("CartPole-v1", 4, backend="vector", seed=3, env_id_offset=4) as g1, \
            create_environment("CartPole-v1", 4, backend="vector", seed=7) as seven:
        t0, t1, t7 = g0.reset(), g1.reset(), seven.reset()
    assert t0.env_id.tolist() == [0, 1, 2, 3] and t1.env_id.tolist() == [4, 5, 6, 7]
    assert torch.equal(t1.observation, t7.observation)
    assert not torch.equal(t0.observation, t1.observation)


def test_seed_after_construction_keeps_the_offset():
    with create_environment("CartPole-v1", 2, backend="sync", seed=0, env_id_offset=2) as g, \
            create_environment("CartPole-v1", 4, backend="sync", seed=10) as whole:
        g.seed(10)
        assert torch.equal(g.reset().observation, whole.reset().observation[2:])


def test_bad_offset_or_thread_count_is_a_user_error():
    with pytest.raises(UserError, match="env_id_offset must be >= 0, got -1"):
        create_environment("CartPole-v1", env_id_offset=-1)
    with pytest.raises(UserError, match="num_threads must be >= 0"):
        create_environment("CartPole-v1", num_threads=-2)


# ----------------------------------------------------------------------- thread counts
@pytest.fixture
def atari_vector_kwargs(monkeypatch):
    """Records the keyword arguments every ``AtariVectorEnv`` is built with."""
    import ale_py.vector_env  # pylint: disable=import-outside-toplevel
    real, seen = ale_py.vector_env.AtariVectorEnv, []

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ale_py.vector_env, "AtariVectorEnv", recording)
    return seen


def test_num_threads_reaches_ale_vector(atari_vector_kwargs):
    gin.clear_config()
    try:
        create_environment(BREAKOUT, 2, backend="ale_vector", num_threads=1).close()
        create_environment(BREAKOUT, 2, backend="ale_vector").close()
        gin.parse_config("ale_vector_env_backend.num_threads = 2")
        create_environment(BREAKOUT, 2, backend="ale_vector").close()  # None: gin's value
        create_environment(BREAKOUT, 2, backend="ale_vector", num_threads=1).close()
    finally:
        gin.clear_config()
    # 0 (the default) becomes the CPUs this process may use, at most one per env
    from alf.utils.cpu_budget import usable_cpus
    assert [k["num_threads"] for k in atari_vector_kwargs] == [1, min(usable_cpus(), 2), 2, 1]


class _FakePool:
    """What alf uses of an envpool gymnasium pool: spaces, reset, step, send/recv, close."""

    def __init__(self, num_envs, seed):
        self.n, self.seed, self.sent = num_envs, seed, []
        self.single_observation_space = gym.spaces.Box(0, 255, (1, 84, 84), np.uint8)
        self.single_action_space = gym.spaces.Discrete(4)

    def _obs(self):
        obs = np.zeros((self.n, 1, 84, 84), np.uint8)
        obs[:, 0, 0, 0] = self.seed + np.arange(self.n)  # shows each env's seed
        return obs

    def reset(self):
        return self._obs(), {"lives": np.full(self.n, 5)}

    def send(self, actions):
        self.sent.append(np.array(actions))

    def recv(self, reset=False, return_info=True):
        assert not reset and return_info
        z = np.zeros(self.n)
        return self._obs(), z, z.astype(bool), z.astype(bool), {"lives": np.full(self.n, 5)}

    def step(self, actions):
        self.send(actions)
        return self.recv()

    def close(self):
        pass


@pytest.fixture
def fake_envpool(monkeypatch):
    """An ``envpool`` module recording ``make`` calls (envpool itself is optional)."""
    made = []
    module = types.ModuleType("envpool")
    module.__spec__ = importlib.machinery.ModuleSpec("envpool", None)
    module.list_all_envs = lambda: ["Breakout-v5"]

    def make(task_id, env_type, seed, **kwargs):
        assert env_type == "gymnasium"
        made.append(dict(kwargs, task_id=task_id, seed=seed))
        return _FakePool(kwargs["num_envs"], seed)

    module.make = make
    monkeypatch.setitem(sys.modules, "envpool", module)
    return made


def test_envpool_gets_threads_offsets_and_its_split(fake_envpool):
    with create_environment(BREAKOUT, 3, backend="envpool", seed=10, env_id_offset=5,
                            num_threads=2) as env:
        ts = env.reset()
        assert ts.env_id.tolist() == [5, 6, 7]
        assert ts.observation[:, 0, 0, 0].tolist() == [15, 16, 17]  # seed + offset + i
        assert env.has_background_step
        env.step_async(torch.tensor([1, 2, 3]))
        pool = env.gym_env.pool
        assert [a.tolist() for a in pool.sent] == [[1, 2, 3]]
        assert env.step_wait().env_id.tolist() == [5, 6, 7]
    assert [(m["num_threads"], m["seed"]) for m in fake_envpool] == [(2, 15)]


# --------------------------------------------------------------------------- backend table
def test_builtin_backends_are_an_explicit_table():
    table = builtin_backends()
    assert sorted(table) == ["ale_vector", "async", "envpool", "sync", "threads", "vector"]
    assert all(isinstance(b, Backend) for b in table.values())
    assert table["ale_vector"].requires == (("ale_py", "atari"),)
    table.pop("sync")  # a fresh dict: changing it changes nothing
    assert "sync" in builtin_backends() and backend_names() == sorted(builtin_backends())
    assert backends._USER_BACKENDS == {}  # pylint: disable=protected-access
    with pytest.raises(UserError) as info:
        get_backend("vectr")
    assert str(info.value) == ("Unknown environment backend 'vectr'. Valid choices: auto, "
                               "ale_vector, async, envpool, sync, threads, vector.")


def test_register_overwrite_and_unregister_restore_the_builtin():
    calls = []

    def wrapped_sync(request):
        calls.append(request)
        return builtin_backends()["sync"].builder(request)

    with pytest.raises(ValueError, match="backend 'sync' already exists"):
        register_backend("sync", wrapped_sync)
    register_backend("sync", wrapped_sync, overwrite=True)
    try:
        create_environment("CartPole-v1", 2, backend="sync", env_id_offset=2).close()
        assert calls[0].env_id_offset == 2 and calls[0].num_threads is None
    finally:
        unregister_backend("sync")
    assert get_backend("sync").builder is backends.sync_backend
    with pytest.raises(ValueError, match="was not added with register_backend"):
        unregister_backend("sync")


def test_fresh_process_importing_only_the_factory_builds_ale_vector():
    code = ("import sys\n"
            "from alf.environments.factory import create_environment\n"
            "from alf.environments import backends\n"
            "assert backends._USER_BACKENDS == {}, backends._USER_BACKENDS\n"
            "env = create_environment('ALE/Breakout-v5', 2, backend='ale_vector', num_threads=1)\n"
            "ts = env.reset(); env.close()\n"
            "print(type(env).__name__, tuple(ts.observation.shape))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "GymVectorEnvironment (2, 1, 84, 84)"


# ----------------------------------------------------------------- daemonic actor processes
def _build_async_in_child(queue):
    try:
        create_environment("CartPole-v1", 1, backend="async").close()
        queue.put("built")
    except UserError as e:
        queue.put(str(e).splitlines()[0])  # gin appends the configurables it passed through


def test_async_backend_in_a_daemonic_process_is_one_clear_error():
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_build_async_in_child, args=(queue,), daemon=True, name="actor-0")
    child.start()
    try:
        msg = queue.get(timeout=60)
    finally:
        child.join(10)
    assert msg == ("backend='async' cannot start env processes from the daemonic process "
                   "'actor-0' (daemonic processes may not have children); start that process "
                   "with daemon=False, or use backend='sync'.")
    assert child.exitcode == 0
