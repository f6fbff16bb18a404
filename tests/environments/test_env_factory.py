"""create_environment: backend choice, errors, seeding, async process hygiene."""
import multiprocessing
import sys

import gin
import gymnasium as gym
import pytest
import torch

from alf import nest
from alf.environments import create_environment, register_backend, unregister_backend
from alf.environments.backends import EnvRequest, select_auto_backend, sync_backend
from alf.environments.env_ids import find_env_spec
from alf.environments.wrappers import MaskVelocityWrapper
from alf.errors import EnvironmentNotFoundError, UserError


def test_unknown_env_names_close_matches():
    with pytest.raises(EnvironmentNotFoundError) as info:
        create_environment("CartPol-v1")
    # gin appends "In call to configurable ..." on a new line; our message is the first line
    msg = str(info.value).splitlines()[0]
    assert "'CartPol-v1'" in msg and "CartPole-v1" in msg and "Did you mean" in msg


def test_unknown_backend_lists_choices():
    with pytest.raises(UserError) as info:
        create_environment("CartPole-v1", backend="processes")
    for name in ("auto", "vector", "sync", "async", "threads", "processes"):
        assert name in str(info.value)


def test_vector_backend_without_vector_entry_point_is_user_error():
    with pytest.raises(UserError, match="sync"):
        create_environment("Pendulum-v1", backend="vector")


def test_missing_optional_dependencies(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # makes `import ale_py` fail
    with pytest.raises(UserError, match=r"pip install -e \.\[atari\]"):
        find_env_spec("ALE/Pong-v5")
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(UserError, match=r"pip install -e \.\[mujoco\]"):
        find_env_spec("HalfCheetah-v5")


def test_auto_backend_selection():
    spec = gym.spec("CartPole-v1")
    assert select_auto_backend(EnvRequest("CartPole-v1"), spec) == "vector"
    assert select_auto_backend(EnvRequest("CartPole-v1", max_episode_steps=9), spec) == "vector"
    assert select_auto_backend(EnvRequest("CartPole-v1", env_kwargs={"sutton_barto_reward": True}),
                               spec) == "vector"
    assert select_auto_backend(EnvRequest("CartPole-v1", render_mode="human"), spec) == "sync"
    assert select_auto_backend(EnvRequest("CartPole-v1", gym_wrappers=(MaskVelocityWrapper,)),
                               spec) == "sync"
    assert select_auto_backend(EnvRequest("Pendulum-v1"), gym.spec("Pendulum-v1")) == "sync"
    with create_environment("CartPole-v1", 2) as env:
        assert type(env.gym_env).__name__ == "CartPoleVectorEnv"
    with create_environment("CartPole-v1", 2, gym_wrappers=[MaskVelocityWrapper]) as env:
        assert isinstance(env.gym_env, gym.vector.SyncVectorEnv)


@pytest.mark.parametrize("backend", ["vector", "sync"])
def test_same_seed_same_time_steps(backend):
    def run(seed):
        with create_environment("CartPole-v1", 3, backend=backend, seed=seed) as env:
            gen = torch.Generator().manual_seed(1)
            out = [env.reset()]
            for _ in range(30):
                out.append(env.step(torch.randint(0, 2, (3,), generator=gen)))
            return out

    a, b, c = run(4), run(4), run(5)
    for x, y in zip(nest.flatten(a), nest.flatten(b)):
        assert torch.equal(x, y)
    assert not torch.equal(a[0].observation, c[0].observation)
    # every sub-env gets its own seed (seed + i)
    assert not torch.equal(a[0].observation[0], a[0].observation[1])


def test_action_space_samplers_are_seeded():
    def samples(seed):
        with create_environment("CartPole-v1", 2, backend="sync", seed=seed) as env:
            sub = [[int(e.action_space.sample()) for _ in range(32)] for e in env.gym_env.envs]
            return sub, env.gym_env.action_space.sample().tolist()

    s1, s2 = samples(0), samples(0)
    assert s1 == s2
    assert s1[0][0] != s1[0][1]  # seeds 0 and 1 give different streams


def test_async_close_reaps_children():
    env = create_environment("CartPole-v1", 2, backend="async", seed=0)
    env.reset()
    env.step(torch.tensor([0, 1]))
    assert len(multiprocessing.active_children()) == 2
    env.close()
    assert multiprocessing.active_children() == []


def test_async_spawn_with_gin_bound_wrapper():
    """spawn children have no gin config: the wrapper bindings must travel with the factory."""
    gin.clear_config()
    try:
        gin.parse_config("MaskVelocityWrapper.velocity_indices = [0]\n"
                         "async_env_backend.context = 'spawn'")
        with create_environment("CartPole-v1", 2, backend="async",
                                gym_wrappers=[MaskVelocityWrapper]) as env:
            ts = env.reset()
            ts = env.step(torch.tensor([1, 1]))
            assert (ts.observation[:, 0] == 0).all()
            assert (ts.observation[:, 1] != 0).all()  # not the default CartPole mask
    finally:
        gin.clear_config()
    assert multiprocessing.active_children() == []


def test_register_backend_extension_point():
    calls = []

    def my_backend(request):
        calls.append(request)
        return sync_backend(request)

    register_backend("my_test_backend", my_backend)
    try:
        with pytest.raises(ValueError):
            register_backend("my_test_backend", my_backend)
        with create_environment("CartPole-v1", 2, backend="my_test_backend", seed=3) as env:
            assert env.batch_size == 2
        assert calls[0].num_envs == 2 and calls[0].seed == 3
    finally:
        unregister_backend("my_test_backend")


def test_backend_checks_options_before_optional_packages():
    """A registered backend's option check runs first, then its package check, then the build."""
    built = []

    def check(request):
        if request.render_mode is not None:
            raise UserError("render_mode is not supported by backend='needs_pkg_backend'")

    register_backend("needs_pkg_backend", built.append, check=check,
                     requires=(("alf_no_such_package_xyz", "xyz"),))
    try:
        with pytest.raises(UserError, match="render_mode.*needs_pkg_backend"):
            create_environment("CartPole-v1", backend="needs_pkg_backend", render_mode="rgb_array")
        with pytest.raises(UserError) as info:
            create_environment("CartPole-v1", backend="needs_pkg_backend")
        assert str(info.value).splitlines()[0] == (
            "backend='needs_pkg_backend' needs alf_no_such_package_xyz, which is not installed. "
            'Install it with: pip install -e ".[xyz]"')
        assert built == []
    finally:
        unregister_backend("needs_pkg_backend")


def test_gin_configures_create_environment():
    gin.clear_config()
    try:
        gin.parse_config("create_environment.env_name = 'Pendulum-v1'\n"
                         "create_environment.num_parallel_environments = 2\n"
                         "create_environment.gym_wrappers = [@MaskVelocityWrapper]")
        with create_environment() as env:
            ts = env.reset()
            assert env.env_name == "Pendulum-v1" and env.batch_size == 2
            assert (ts.observation[:, 2] == 0).all()
    finally:
        gin.clear_config()


def test_reseed_controls_next_reset():
    from alf.environments import create_environment
    env = create_environment("CartPole-v1", num_parallel_environments=2, backend="sync", seed=0)
    try:
        first = env.reset().observation.clone()
        env.reset()
        env.seed(0)
        assert torch.equal(env.reset().observation, first)  # same seed -> same episodes
        env.seed(12345)
        assert not torch.equal(env.reset().observation, first)
    finally:
        env.close()
