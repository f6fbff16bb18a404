"""Atari suite: the same preprocessing, specs and life-loss semantics on every backend.

Cross-backend identity is checked exactly: with deterministic resets (no
sticky actions, ``noop_max=0`` for ale_vector vs sync, ``noop_max=1`` without
FIRE for sync vs envpool) the backends must produce bit-identical TimeSteps
for the same action sequence.
"""
import dataclasses
import sys

import gin
import gymnasium as gym
import numpy as np
import pytest
import torch

from alf import nest
from alf.data_structures import StepType
from alf.environments import AtariOptions, atari_options, create_environment
from alf.environments.atari import (LifeLossDiscount, envpool_task_id, is_atari_spec,
                                    rom_name)
from alf.environments.backends import EnvRequest, select_auto_backend
from alf.environments.env_ids import find_env_spec
from alf.errors import EnvironmentNotFoundError, UserError
from alf.tensor_specs import BoundedTensorSpec

FIRST, MID, LAST = StepType.FIRST, StepType.MID, StepType.LAST
BREAKOUT = "ALE/Breakout-v5"


def _has_envpool() -> bool:
    try:
        import envpool  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return False
    return True


ENVPOOL = pytest.param("envpool", marks=pytest.mark.skipif(not _has_envpool(),
                                                           reason="envpool not installed"))
FAST_BACKENDS = ["ale_vector", "sync", ENVPOOL]


def _rollout(env, actions):
    out = [env.reset()]
    for a in actions:
        out.append(env.step(a))
    return out


def _random_actions(n_actions, batch, steps, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, n_actions, (batch,), generator=gen) for _ in range(steps)]


def _assert_same_time_steps(a, b):
    for ta, tb in zip(a, b):
        for x, y in zip(nest.flatten(ta), nest.flatten(tb)):
            assert x.dtype == y.dtype and torch.equal(x, y)


# ------------------------------------------------------------------ options / ids
def test_options_defaults_and_validation():
    assert atari_options() == AtariOptions()
    o = AtariOptions()
    assert (o.noop_max, o.frame_skip, o.screen_size, o.grayscale, o.fire_on_reset,
            o.sticky_action_prob, o.max_episode_frames, o.full_action_space,
            o.terminal_on_life_loss, o.fire_after_life_loss, o.preprocessing) == (
                30, 4, 84, True, True, 0.0, 108_000, False, True, False, True)
    assert o.observation_shape == (1, 84, 84)
    with pytest.raises(UserError, match="frame_skip"):
        AtariOptions(frame_skip=0)
    with pytest.raises(UserError, match="sticky_action_prob"):
        atari_options(sticky_action_prob=1.5)


def test_rom_names_and_ids():
    for env_id, rom in [("ALE/SpaceInvaders-v5", "space_invaders"),
                        ("SpaceInvadersNoFrameskip-v4", "space_invaders"),
                        ("ALE/Breakout-v5", "breakout"), ("PongNoFrameskip-v4", "pong")]:
        spec = find_env_spec(env_id)
        assert is_atari_spec(spec) and rom_name(spec) == rom
    assert envpool_task_id("space_invaders") == "SpaceInvaders-v5"
    assert not is_atari_spec(gym.spec("CartPole-v1"))


def test_unknown_game_is_one_clear_error():
    with pytest.raises(EnvironmentNotFoundError) as info:
        create_environment("ALE/Breakot-v5")
    msg = str(info.value).splitlines()[0]
    assert "'ALE/Breakot-v5'" in msg and "ALE/Breakout-v5" in msg and "Did you mean" in msg


# ----------------------------------------------------------------- specs / structure
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_observation_spec_and_time_step_structure(backend):
    with create_environment(BREAKOUT, 2, backend=backend, seed=1) as env:
        spec = env.time_step_spec()
        assert spec.observation == BoundedTensorSpec((1, 84, 84), torch.uint8, 0, 255)
        assert spec.prev_action == BoundedTensorSpec((), torch.int64, 0, 3)
        for ts in _rollout(env, _random_actions(4, 2, 100, seed=1)):
            nest.assert_same_structure(ts, spec)
            for t, s in zip(nest.flatten(ts), nest.flatten(spec)):
                assert t.dtype == s.dtype and tuple(t.shape) == (2,) + tuple(s.shape)
            assert ts.env_info == {}


def test_all_backends_have_identical_specs():
    backends = ["ale_vector", "sync", "async"] + (["envpool"] if _has_envpool() else [])
    specs = []
    for b in backends:
        with create_environment(BREAKOUT, 1, backend=b) as env:
            specs.append(env.time_step_spec())
    assert all(s == specs[0] for s in specs[1:])


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_rgb_observations(backend):
    opts = AtariOptions(grayscale=False, screen_size=64)
    with create_environment(BREAKOUT, 1, backend=backend, atari=opts) as env:
        assert env.observation_spec() == BoundedTensorSpec((3, 64, 64), torch.uint8, 0, 255)
        env.reset()
        ts = env.step(torch.tensor([1]))
        assert ts.observation.shape == (1, 3, 64, 64) and ts.observation.is_contiguous()


# ------------------------------------------------------ identical preprocessing
@pytest.mark.parametrize("fire_on_reset", [True, False])
def test_ale_vector_and_sync_are_bit_identical(fire_on_reset):
    """Deterministic resets (no no-ops, no sticky actions): same frames, rewards, discounts."""
    opts = AtariOptions(noop_max=0, fire_on_reset=fire_on_reset)
    actions = _random_actions(6, 1, 120, seed=2)
    runs = []
    for b in ["ale_vector", "sync"]:
        with create_environment("ALE/SpaceInvaders-v5", 1, backend=b, atari=opts) as env:
            runs.append(_rollout(env, actions))
    _assert_same_time_steps(*runs)
    rewards = torch.stack([ts.reward for ts in runs[0]])
    assert rewards.dtype == torch.float32 and rewards.max() > 1  # unclipped (invaders: 5..30)


def test_sync_and_envpool_are_bit_identical():
    pytest.importorskip("envpool")
    opts = AtariOptions(noop_max=1, fire_on_reset=False)  # both: exactly one reset no-op
    actions = _random_actions(6, 1, 120, seed=2)
    runs = []
    for b in ["sync", "envpool"]:
        with create_environment("ALE/SpaceInvaders-v5", 1, backend=b, atari=opts) as env:
            runs.append(_rollout(env, actions))
    _assert_same_time_steps(*runs)
    assert torch.stack([ts.reward for ts in runs[0]]).max() > 1


def test_legacy_id_is_the_same_game():
    opts = AtariOptions(noop_max=0)
    actions = _random_actions(4, 1, 60, seed=0)
    runs = []
    for name in [BREAKOUT, "BreakoutNoFrameskip-v4"]:
        with create_environment(name, 1, backend="ale_vector", atari=opts) as env:
            runs.append(_rollout(env, actions))
    _assert_same_time_steps(*runs)


# ------------------------------------------------------------------- life loss
def _episodes(steps):
    """Per env, the (step_type, discount) lists of every completed episode."""
    st = torch.stack([ts.step_type for ts in steps]).T
    disc = torch.stack([ts.discount for ts in steps]).T
    episodes = []
    for s, d in zip(st.tolist(), disc.tolist()):
        start = None
        for t, (typ, dis) in enumerate(zip(s, d)):
            if typ == FIRST:
                start = t
            elif typ == LAST and start is not None:
                after = s[t + 1] if t + 1 < len(s) else None
                episodes.append((s[start:t + 1], d[start:t + 1], after))
                start = None
    return episodes


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_life_loss_gives_mid_discount0_and_game_continues(backend):
    """Breakout has 5 lives: 4 MID steps with discount 0, then LAST (discount 0), then FIRST."""
    with create_environment(BREAKOUT, 2, backend=backend, seed=0) as env:
        steps = _rollout(env, _random_actions(4, 2, 300, seed=0))
    episodes = _episodes(steps)
    assert episodes, "no game over within 300 random steps"
    for types, discounts, after in episodes:
        lost = [i for i, (t, d) in enumerate(zip(types, discounts)) if t == MID and d == 0]
        assert len(lost) == 4, (types, discounts)
        assert types[-1] == LAST and discounts[-1] == 0
        assert types[0] == FIRST and discounts[0] == 1
        assert after in (FIRST, None)
    assert all(ts.step_type[i] == FIRST and ts.discount[i] == 1 and ts.reward[i] == 0
               for prev, ts in zip(steps, steps[1:]) for i in range(2) if prev.step_type[i] == LAST)


def test_terminal_on_life_loss_false_keeps_discount1():
    opts = AtariOptions(terminal_on_life_loss=False)
    with create_environment(BREAKOUT, 1, backend="ale_vector", seed=0, atari=opts) as env:
        steps = _rollout(env, _random_actions(4, 1, 240, seed=0))
    assert _episodes(steps)
    for ts in steps:
        assert (ts.discount[ts.step_type != LAST] == 1).all()


def test_life_loss_hook_is_vectorised_and_ignores_new_episodes():
    hook = LifeLossDiscount()
    hook.reset({"lives": np.array([5, 5, 3, 0])})
    discount = np.ones(4, np.float32)
    # row 0 loses a life, row 1 gains one, row 2 is a fresh episode (reset row), row 3 has none
    hook({"lives": np.array([4, 6, 2, 0])}, discount, np.array([False, False, True, False]))
    assert discount.tolist() == [0, 1, 1, 1]
    with pytest.raises(UserError, match="lives"):
        hook({}, discount, None)


# ------------------------------------------------------------------ fire handling
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_fire_on_reset_launches_the_ball(backend):
    """With NOOP only, Breakout loses a life iff the ball was launched by fire-on-reset."""
    noop = [torch.zeros(1, dtype=torch.int64)] * 120
    lost = {}
    for fire in (True, False):
        with create_environment(BREAKOUT, 1, backend=backend,
                                atari=AtariOptions(fire_on_reset=fire)) as env:
            steps = _rollout(env, noop)
        lost[fire] = sum(int(ts.discount[0] == 0) for ts in steps)
    assert lost == {True: 1, False: 0}


def test_fire_after_life_loss():
    """NOOP only: with FIRE after each lost life the game runs to game over; needs sync/async."""
    opts = AtariOptions(fire_after_life_loss=True)
    with create_environment(BREAKOUT, 1, backend="auto", atari=opts) as env:
        assert isinstance(env.gym_env, gym.vector.SyncVectorEnv)
        steps = _rollout(env, [torch.zeros(1, dtype=torch.int64)] * 400)
    types = [int(ts.step_type[0]) for ts in steps]
    assert LAST in types
    last = types.index(LAST)
    assert sum(int(ts.discount[0] == 0) for ts in steps[:last]) == 4
    for backend in ("ale_vector", "envpool"):
        with pytest.raises(UserError, match=f"fire_after_life_loss.*{backend}"):
            create_environment(BREAKOUT, 1, backend=backend, atari=opts)


# ------------------------------------------------------------- truncation / seeds
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_max_episode_steps_truncates_in_agent_steps(backend):
    with create_environment(BREAKOUT, 1, backend=backend, max_episode_steps=10,
                            atari=AtariOptions(noop_max=1)) as env:
        steps = _rollout(env, [torch.zeros(1, dtype=torch.int64)] * 12)
    types = [int(ts.step_type[0]) for ts in steps]
    # ale_vector/envpool count agent steps exactly; sync's ALE frame counter includes the
    # reset frames, so its limit can be hit up to one agent step early here
    last = types.index(LAST)
    assert last in ((10,) if backend != "sync" else (9, 10))
    assert steps[last].discount[0] == 1 and types[last + 1] == FIRST


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_same_seed_same_time_steps_and_reseed(backend):
    actions = _random_actions(4, 1, 30, seed=5)
    with create_environment(BREAKOUT, 1, backend=backend, seed=7) as env:
        a = _rollout(env, actions)
        env.seed(7)
        b = _rollout(env, actions)
    _assert_same_time_steps(a, b)


# ------------------------------------------------------- backend choice / errors
def test_auto_backend_for_atari():
    spec = find_env_spec(BREAKOUT)
    opts = AtariOptions()
    assert select_auto_backend(EnvRequest(BREAKOUT, atari=opts), spec) == "ale_vector"
    for kwargs in [dict(render_mode="rgb_array"), dict(env_kwargs={"mode": 0}),
                   dict(atari=dataclasses.replace(opts, preprocessing=False))]:
        request = EnvRequest(BREAKOUT, **{"atari": opts, **kwargs})
        assert select_auto_backend(request, spec) == "sync"
    with create_environment(BREAKOUT, 2) as env:
        assert type(env.gym_env).__name__ == "AtariVectorEnv"
    with create_environment(BREAKOUT, 2, backend="vector") as env:  # the native vector env
        assert type(env.gym_env).__name__ == "AtariVectorEnv"


def test_incompatible_options_name_option_and_backend():
    with pytest.raises(UserError, match="render_mode.*ale_vector"):
        create_environment(BREAKOUT, 1, backend="ale_vector", render_mode="rgb_array")
    with pytest.raises(UserError, match="preprocessing=False.*ale_vector"):
        create_environment(BREAKOUT, 1, backend="ale_vector",
                           atari=AtariOptions(preprocessing=False))
    with pytest.raises(UserError, match="gym_wrappers.*ale_vector"):
        create_environment(BREAKOUT, 1, backend="ale_vector", gym_wrappers=[lambda e: e])
    with pytest.raises(UserError, match="only runs Atari"):
        create_environment("CartPole-v1", 1, backend="ale_vector")
    with pytest.raises(UserError, match="not an Atari"):
        create_environment("CartPole-v1", 1, atari=AtariOptions())
    with pytest.raises(UserError, match="atari_options.sticky_action_prob"):
        create_environment(BREAKOUT, 1, backend="sync",
                           env_kwargs={"repeat_action_probability": 0.25})
    # option errors come before the import check: no envpool needed to get them
    with pytest.raises(UserError, match="noop_max=0.*envpool"):
        create_environment(BREAKOUT, 1, backend="envpool", atari=AtariOptions(noop_max=0))


@pytest.mark.parametrize("installed", [True, False])
def test_envpool_option_errors_do_not_need_envpool(installed, monkeypatch):
    """Each unsupported option names itself whether or not envpool is importable; a valid
    request without envpool names the package and the extra that installs it."""
    if installed:
        pytest.importorskip("envpool", reason="envpool not installed (the [envpool] extra)")
    else:
        monkeypatch.setitem(sys.modules, "envpool", None)  # makes `import envpool` fail
    bad = [(dict(atari=AtariOptions(fire_after_life_loss=True)), "fire_after_life_loss"),
           (dict(atari=AtariOptions(noop_max=0)), "noop_max=0"),
           (dict(atari=AtariOptions(preprocessing=False)), "preprocessing=False"),
           (dict(gym_wrappers=[lambda e: e]), "gym_wrappers"),
           (dict(env_kwargs={"mode": 0}), "env_kwargs")]
    for kwargs, option in bad:
        with pytest.raises(UserError) as info:
            create_environment(BREAKOUT, 1, backend="envpool", **kwargs)
        first = str(info.value).splitlines()[0]
        assert option in first and "backend='envpool'" in first and "not installed" not in first
    if not installed:
        with pytest.raises(UserError) as info:
            create_environment(BREAKOUT, 1, backend="envpool")
        assert str(info.value).splitlines()[0] == (
            "backend='envpool' needs envpool, which is not installed. "
            'Install it with: pip install -e ".[envpool]"')


# ---------------------------------------------------------------------- render / raw
@pytest.mark.parametrize("backend", ["auto", ENVPOOL])
def test_render_rgb_array_is_the_game_screen(backend):
    with create_environment(BREAKOUT, 1, backend=backend, render_mode="rgb_array") as env:
        env.reset()
        env.step(torch.tensor([1]))
        frame = env.render()
        assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
        assert frame.shape == (210, 160, 3)
        assert env.observation_spec().shape == (1, 84, 84)  # rendering does not change observations


def test_raw_frames_option():
    with create_environment(BREAKOUT, 1, atari=AtariOptions(preprocessing=False)) as env:
        assert env.observation_spec() == BoundedTensorSpec((210, 160, 3), torch.uint8, 0, 255)
        env.reset()
        ts = env.step(torch.tensor([1]))
        assert ts.observation.shape == (1, 210, 160, 3)


# ------------------------------------------------------------------------- spawn
def test_gin_options_reach_spawn_workers():
    """Options are resolved in the main process and carried in the EnvRequest.

    A spawn worker has no gin config: had it used the default 84x84, writing its
    observation into the 42x42 shared memory would fail.
    """
    gin.clear_config()
    try:
        gin.parse_config("atari_options.screen_size = 42\n"
                         "atari_options.terminal_on_life_loss = False\n"
                         "async_env_backend.context = 'spawn'")
        with create_environment(BREAKOUT, 1, backend="async") as env:
            assert env.observation_spec().shape == (1, 42, 42)
            env.reset()
            ts = env.step(torch.tensor([1]))
            assert ts.observation.shape == (1, 1, 42, 42) and ts.observation.float().mean() > 0
            assert env._info_hook is None  # pylint: disable=protected-access
    finally:
        gin.clear_config()
