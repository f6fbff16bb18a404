"""The C++ Atari engines as alf backends: ``"ale_vector"`` and ``"envpool"``.

Their builders are listed in :func:`alf.environments.backends.builtin_backends`
(importing this module registers nothing).

Atari (ALE) ids get the preprocessing of :mod:`alf.environments.atari` on
every backend (options in ``EnvRequest.atari``, resolved in the main process):

- ``"ale_vector"`` (what ``"auto"`` picks for Atari): ale-py's C++
  ``AtariVectorEnv``, envs stepped by a C++ thread pool (~2,900 agent
  steps/s for 8 Breakout envs on 2 cores; ``bench/atari_env_rate.py``
  compares the backends) and always installed with ale-py. ``"vector"`` is the
  same for Atari ids (it is their native vector implementation). Cannot
  render, run ``gym_wrappers`` / ``env_kwargs``, raw frames or
  ``fire_after_life_loss``: those raise a :class:`UserError` here, and make
  ``"auto"`` pick ``"sync"``.
- ``"envpool"``: ``envpool.make(..., env_type="gymnasium")`` (C++ threads),
  when envpool is installed; can render, same other limits as ``ale_vector``.
- ``"sync"`` / ``"async"``: ``gym.make`` + gymnasium's ``AtariPreprocessing``
  + alf's fire/channel-first wrappers, per env; support every option.

What differs between Atari backends. Not the specs, the TimeStep semantics
or the per-step preprocessing: frame skip, max-pool, greyscale palette and
``INTER_AREA`` resize are the same computation, and on the same action
sequence the backends give bit-identical TimeSteps whenever their resets
coincide (``ale_vector`` vs ``sync`` with ``noop_max=0``, ``sync`` vs
``envpool`` with ``noop_max=1`` and no fire-on-reset; see
``tests/environments/test_atari.py``). What does differ:

- the RNG streams: the same seed gives different no-op counts and sticky
  action draws on different engines;
- the reset sequence: ``ale_vector`` presses FIRE for one frame, then
  ``U[0, noop_max-1]`` NOOP frames (one fewer after FIRE); ``envpool``
  ``U[1, noop_max]`` NOOPs (one fewer with FIRE), then FIRE; ``sync``/``async``
  FIRE for one frame (:class:`~alf.environments.atari.FireOnReset`), then
  ``AtariPreprocessing``'s ``U[1, noop_max]`` NOOPs;
- the frame limit: ``sync``/``async`` use ALE's episode frame counter, which
  includes the reset frames; ``ale_vector`` counts only step frames and
  ``envpool`` agent steps (``ceil(max_episode_frames / frame_skip)``), so
  ``sync`` may truncate up to ``(noop_max + 1) / frame_skip`` agent steps
  earlier;
- ``envpool`` cannot take ``noop_max=0`` (it crashes), so it is refused;
  ``fire_after_life_loss``, raw frames, ``gym_wrappers`` and ``env_kwargs``
  are per-env features (``sync``/``async`` only); ``ale_vector`` cannot render.
"""
import functools
from typing import Any, Mapping, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from alf.config import configurable
from alf.environments.alf_environment import AlfEnvironment
from alf.environments.atari import (AtariOptions, envpool_task_id, is_atari_spec, life_loss_hook,
                                    rom_name)
from alf.environments.env_ids import find_env_spec
from alf.environments.env_request import EnvRequest
from alf.environments.gym_environment import GymVectorEnvironment
from alf.errors import UserError
from alf.utils.cpu_budget import usable_cpus


def atari_vector_problem(request: EnvRequest, backend: str) -> Optional[str]:
    """Why the C++ Atari engine ``backend`` (``ale_vector``/``envpool``) cannot build ``request``.

    None if it can. The message names the option and the backend.
    """
    options = request.atari
    if options is None:
        spec = find_env_spec(request.env_name)
        if not is_atari_spec(spec):
            return f"backend='{backend}' only runs Atari (ALE) games, not '{request.env_name}'"
        options = AtariOptions()
    if not options.preprocessing:
        return (f"atari_options.preprocessing=False (raw frames) is not supported by "
                f"backend='{backend}', which always preprocesses")
    if options.fire_after_life_loss:
        return f"atari_options.fire_after_life_loss=True is not supported by backend='{backend}'"
    if request.gym_wrappers:
        return (f"gym_wrappers are not supported by backend='{backend}' (they wrap single "
                "envs, which it does not have)")
    if request.env_kwargs:
        return (f"env_kwargs {sorted(request.env_kwargs)} are not supported by "
                f"backend='{backend}'")
    if request.render_mode is not None and backend == "ale_vector":
        return ("render_mode is not supported by backend='ale_vector' (ale-py's AtariVectorEnv "
                "cannot render)")
    return None


def _atari_request(request: EnvRequest, backend: str) -> AtariOptions:
    problem = atari_vector_problem(request, backend)
    if problem is not None:
        raise UserError(f"Cannot build '{request.env_name}': {problem}. Use backend='sync' or "
                        "'async' (backend='auto' picks 'sync' in this case).")
    return request.atari if request.atari is not None else AtariOptions()


def check_ale_vector_request(request: EnvRequest) -> None:
    """Raise a :class:`UserError` naming the option ``"ale_vector"`` cannot honour."""
    _atari_request(request, "ale_vector")


def check_envpool_request(request: EnvRequest) -> AtariOptions:
    """The request's Atari options, or a :class:`UserError` naming the one ``"envpool"`` cannot honour.

    Needs no envpool: option errors are the same with or without it installed
    (whether envpool has the game is only known after importing it).
    """
    options = _atari_request(request, "envpool")
    if options.noop_max < 1:
        raise UserError(f"Cannot build '{request.env_name}': atari_options.noop_max=0 is not "
                        "supported by backend='envpool' (envpool crashes on it); use noop_max >= 1 "
                        "or backend='ale_vector' / 'sync'.")
    return options


class _ChannelFirstVectorEnv(gym.vector.VectorObservationWrapper):
    """``AtariVectorEnv`` RGB ``[B, 1, H, W, 3]`` -> ``[B, 3, H, W]`` (fresh, contiguous)."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        _, h, w, c = env.single_observation_space.shape
        self.single_observation_space = gym.spaces.Box(0, 255, (c, h, w), np.uint8)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              env.num_envs)

    def observations(self, observations: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(observations[:, 0].transpose(0, 3, 1, 2))

    def send(self, actions: np.ndarray) -> None:
        """Start a step of ``AtariVectorEnv`` (returns at once; :meth:`recv` waits)."""
        self.env.send(actions)

    def recv(self) -> tuple:
        """The step started by :meth:`send`, observations channel-first like :meth:`step`."""
        obs, reward, terminated, truncated, info = self.env.recv()
        return self.observations(obs), reward, terminated, truncated, info


def _num_threads(request: EnvRequest, configured: int) -> int:
    """``request.num_threads`` (a per-worker cap) when set, else the gin-configured value;
    0 becomes the CPUs this process may use (:func:`~alf.utils.cpu_budget.usable_cpus`:
    the engines' own default counts every core of the host, a cgroup quota or an
    affinity mask notwithstanding), at most one per env."""
    n = int(configured if request.num_threads is None else request.num_threads)
    return n if n > 0 else max(1, min(usable_cpus(), request.num_envs))


@configurable
def ale_vector_env_backend(request: EnvRequest, num_threads: int = 0,
                           thread_affinity_offset: int = -1) -> AlfEnvironment:
    """The ``"ale_vector"`` backend: ale-py's C++ ``AtariVectorEnv`` with alf's Atari options.

    ``AtariVectorEnv(rom, num_envs, stack_num=1, reward_clipping=False,
    episodic_life=False, ...)``; life loss from its ``info["lives"]``
    (:class:`~alf.environments.atari.LifeLossDiscount`). Its observations are
    fresh arrays every step (checked), so they are not copied. ``step_async``
    is its ``send`` (the C++ threads step while the caller works),
    ``step_wait`` its ``recv``.

    Args:
        request: what to build (an Atari id); ``request.num_threads``, when
            not None, overrides ``num_threads``.
        num_threads: C++ worker threads; 0: one per CPU this process may use, at
            most ``num_envs``.
        thread_affinity_offset: pin threads to cores from this index (-1: no pinning).
    """
    options = _atari_request(request, "ale_vector")
    # deferred: ale_py is optional/heavy
    from ale_py.vector_env import AtariVectorEnv  # pylint: disable=import-outside-toplevel
    rom = rom_name(find_env_spec(request.env_name))
    env = AtariVectorEnv(
        rom, request.num_envs, num_threads=_num_threads(request, num_threads),
        thread_affinity_offset=int(thread_affinity_offset),
        max_num_frames_per_episode=options.max_episode_frames,
        repeat_action_probability=options.sticky_action_prob,
        full_action_space=options.full_action_space, autoreset_mode=AutoresetMode.NEXT_STEP,
        img_height=options.screen_size, img_width=options.screen_size,
        grayscale=options.grayscale, stack_num=1, frameskip=options.frame_skip,
        maxpool=options.frame_skip > 1, noop_max=options.noop_max, episodic_life=False,
        life_loss_info=False, reward_clipping=False, use_fire_reset=options.fire_on_reset)
    if not options.grayscale:
        env = _ChannelFirstVectorEnv(env)
    return GymVectorEnvironment(env, request.env_name, request.seed, copy_observations=False,
                                enforce_autoreset=True, info_hook=life_loss_hook(options),
                                env_id_offset=request.env_id_offset)


def ale_vector_backend(request: EnvRequest) -> AlfEnvironment:
    """The ``"ale_vector"`` backend; knobs are bound on ``ale_vector_env_backend`` in gin."""
    return ale_vector_env_backend(request)


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """An envpool gymnasium pool as a re-seedable gymnasium ``VectorEnv``.

    envpool fixes its seeds when the pool is made (``reset(seed=...)`` is
    ignored with a warning), so ``reset(seed=s)`` remakes the pool with
    ``seed=s`` (env ``i`` gets ``s + i``) unless it is the fresh pool already
    made with that seed. envpool's own autoreset is next-step: the step after
    a done row resets it (reward 0, not done).

    Args:
        task_id: envpool id, e.g. ``"Breakout-v5"``.
        make_kwargs: ``envpool.make`` arguments other than ``seed``/``env_type``.
        seed: seed of the first pool.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}

    def __init__(self, task_id: str, make_kwargs: Mapping[str, Any], seed: int):
        import envpool  # deferred: envpool is optional/heavy  pylint: disable=import-outside-toplevel
        self._make = functools.partial(envpool.make, task_id, env_type="gymnasium",
                                       **make_kwargs)
        self._seed = int(seed)
        self._pool = self._make(seed=self._seed)
        self._fresh = True
        self.num_envs = int(make_kwargs["num_envs"])
        self.render_mode = make_kwargs.get("render_mode")
        self.single_observation_space = self._pool.single_observation_space
        self.single_action_space = self._pool.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if options:
            raise UserError(f"EnvPoolVectorEnv.reset: options are not supported ({options}).")
        if seed is not None and not (self._fresh and int(seed) == self._seed):
            self._pool.close()
            self._seed = int(seed)
            self._pool = self._make(seed=self._seed)
        self._fresh = False
        return self._pool.reset()

    @property
    def pool(self):
        """The current envpool object (for inspection and raw benchmarks)."""
        return self._pool

    def step(self, actions: np.ndarray):
        return self._pool.step(actions)

    def send(self, actions: np.ndarray) -> None:
        """Start a step (envpool's ``send``; :meth:`recv` waits for it)."""
        self._pool.send(actions)

    def recv(self) -> tuple:
        """The step started by :meth:`send`, as :meth:`step` returns it."""
        return self._pool.recv(reset=False, return_info=True)

    def render(self):
        return self._pool.render()

    def close_extras(self, **kwargs) -> None:
        self._pool.close()


@configurable
def envpool_env_backend(request: EnvRequest, num_threads: int = 0,
                        thread_affinity_offset: int = -1) -> AlfEnvironment:
    """The ``"envpool"`` backend: ``envpool.make(task, env_type="gymnasium", ...)`` for Atari ids.

    Passes the Atari options (``stack_num=1, episodic_life=False,
    reward_clip=False``, ``max_episode_steps = ceil(max_episode_frames /
    frame_skip)``); life loss from ``info["lives"]``; ``render_mode`` is
    supported. Needs ``pip install -e ".[envpool]"``.

    Args:
        request: what to build (an Atari id); ``request.num_threads``, when
            not None, overrides ``num_threads``.
        num_threads: envpool worker threads (0: one per CPU this process may use, at
            most ``num_envs``).
        thread_affinity_offset: pin threads to cores from this index (-1: no pinning).
    """
    options = check_envpool_request(request)  # options first: same errors without envpool
    try:  # deferred: envpool is optional/heavy
        import envpool  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise UserError(f"backend='envpool' needs envpool, which is not installed ({e}). "
                        'Install it with: pip install -e ".[envpool]"') from None
    rom = rom_name(find_env_spec(request.env_name))
    task_id = envpool_task_id(rom)
    if task_id not in envpool.list_all_envs():
        raise UserError(f"backend='envpool' has no Atari game '{rom}' (looked for '{task_id}' in "
                        f"envpool.list_all_envs()); use backend='ale_vector' or 'sync'.")
    make_kwargs = dict(
        num_envs=request.num_envs, batch_size=request.num_envs,
        num_threads=_num_threads(request, num_threads),
        thread_affinity_offset=int(thread_affinity_offset), stack_num=1,
        frame_skip=options.frame_skip, noop_max=options.noop_max, episodic_life=False,
        zero_discount_on_life_loss=False, reward_clip=False,
        use_fire_reset=options.fire_on_reset, img_height=options.screen_size,
        img_width=options.screen_size, gray_scale=options.grayscale,
        full_action_space=options.full_action_space,
        repeat_action_probability=options.sticky_action_prob,
        max_episode_steps=-(-options.max_episode_frames // options.frame_skip))
    if request.render_mode is not None:
        make_kwargs["render_mode"] = request.render_mode
    env = EnvPoolVectorEnv(task_id, make_kwargs, request.seed + request.env_id_offset)
    return GymVectorEnvironment(env, request.env_name, request.seed, copy_observations=False,
                                enforce_autoreset=True, info_hook=life_loss_hook(options),
                                env_id_offset=request.env_id_offset)


def envpool_backend(request: EnvRequest) -> AlfEnvironment:
    """The ``"envpool"`` backend; knobs are bound on ``envpool_env_backend`` in gin."""
    return envpool_env_backend(request)

