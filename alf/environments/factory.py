"""``create_environment``: the one configurable entry point for building envs.

Gin usage::

    create_environment.env_name = "CartPole-v1"
    create_environment.num_parallel_environments = 8
    create_environment.backend = "auto"   # vector | sync | threads | async | ale_vector | envpool | auto
    create_environment.gym_wrappers = [@MaskVelocityWrapper]
    atari_options.sticky_action_prob = 0.25  # Atari ids: see alf.environments.atari
    create_environment.check_env = False     # skip the start-up check (env_checker.py)
    create_environment.check_values = False  # skip the per-step NaN/inf check (value_check.py)
"""
import dataclasses
import functools
from typing import Any, Callable, Optional, Sequence, Tuple

import gin
import gymnasium as gym

from alf.config import configurable
from alf.config_ranges import NonNegativeInt, PositiveInt
from alf.environments import backends as _backends
from alf.environments.alf_environment import AlfEnvironment
from alf.environments.atari import AtariOptions, atari_options, is_atari_spec
from alf.environments.env_checker import check_environment
from alf.environments.env_ids import find_env_spec
from alf.environments.gym_environment import GymVectorEnvironment
from alf.errors import UserError


def _with_gin_bindings(fn: Callable) -> Callable:
    """``fn`` with its current gin bindings made explicit (``functools.partial``).

    Env worker processes started with ``spawn``/``forkserver`` have no gin
    config, so a configurable wrapper class would silently lose its bindings
    there. Binding them here makes the factory self-contained and picklable.
    """
    try:
        bindings = gin.get_bindings(fn)
    except Exception:  # noqa: BLE001 - not a gin configurable
        return fn
    return functools.partial(fn, **bindings) if bindings else fn


@configurable
def create_environment(env_name: str = "CartPole-v1",
                       num_parallel_environments: PositiveInt = 1,
                       backend: str = "auto",
                       seed: int = 0,
                       env_kwargs: Optional[dict] = None,
                       gym_wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
                       render_mode: Optional[str] = None,
                       max_episode_steps: Optional[PositiveInt] = None,
                       atari: Optional[AtariOptions] = None,
                       env_id_offset: NonNegativeInt = 0,
                       num_threads: Optional[int] = None,
                       report_executed_action: bool = False,
                       check_env: bool = True,
                       check_values: bool = True) -> AlfEnvironment:
    """Build ``num_parallel_environments`` copies of a gymnasium env as one batched env.

    Args:
        env_name: gymnasium id, e.g. ``"CartPole-v1"``, ``"ALE/Pong-v5"``,
            ``"HalfCheetah-v5"`` or ``"module:Env-v0"``.
        num_parallel_environments: batch size ``B`` of every TimeStep.
        backend: ``"vector"`` (native vectorised env), ``"sync"`` (in-process
            loop), ``"threads"`` (a thread per env: envs whose step waits, not
            CPU-bound ones), ``"async"`` (subprocesses + shared memory),
            ``"ale_vector"`` (ale-py's C++ Atari vector env), ``"envpool"``,
            ``"auto"`` (Atari ids: ``"ale_vector"``, or ``"sync"`` when the
            other arguments need per-env envs, e.g. ``render_mode``; other
            ids: ``"vector"`` when the env has a native vector implementation
            compatible with the other arguments, else ``"sync"``), or any name
            added with :func:`alf.environments.backends.register_backend`.
        seed: env ``i`` (and its action-space sampler) is seeded with
            ``seed + env_id_offset + i`` (a native vector env with a single RNG
            for the whole batch, e.g. CartPole's ``vector``, seeds it with
            ``seed + env_id_offset``).
        env_kwargs: extra keyword arguments for the env constructor.
        gym_wrappers: callables ``w(env) -> env`` applied, in order, to every sub-env
            (e.g. ``[@MaskVelocityWrapper]``); per-env backends only: ``auto`` -> ``"sync"``.
        render_mode: e.g. ``"rgb_array"`` to make ``render()`` return frames
            (Atari: the ``[210, 160, 3]`` game screen of env 0).
        max_episode_steps: time limit (truncation) overriding the registered
            one. For preprocessed Atari ids it is in agent steps and replaces
            ``AtariOptions.max_episode_frames`` with ``max_episode_steps *
            frame_skip``.
        atari: preprocessing and life-loss options for Atari (ALE) ids (see
            :mod:`alf.environments.atari`); None: the gin-configured
            ``atari_options()``, resolved here in the main process and carried
            to env workers. Must be None for other ids.
        env_id_offset: for one *env group* of several (async actors, ranks):
            ``TimeStep.env_id`` of env ``i`` is ``env_id_offset + i`` and its
            seed ``seed + env_id_offset + i``, so groups made with offsets 0 and
            4 (4 envs each) never share replay rows or seeds, and their envs
            are seeded as one group of 8 would be.
        num_threads: size of the C++ thread pool of ``ale_vector`` / ``envpool``
            (0: the engine's default, about one per core), e.g. a per-worker
            cap; None: the gin-configured ``ale_vector_env_backend.num_threads``
            / ``envpool_env_backend.num_threads``. Ignored by backends without
            a thread pool.
        report_executed_action: ``TimeStep.prev_action`` is the action the env executed
            (clipped to a Box, or the env's ``info["executed_action"]``), not the
            agent's request (``TrainerConfig.overwrite_policy_output``).
        check_env: first check one copy of the env (:mod:`alf.environments.env_checker`).
        check_values: check each step for NaN/inf (:mod:`alf.environments.value_check`).

    Returns:
        an :class:`AlfEnvironment` with ``batch_size == num_parallel_environments``.

    Raises:
        EnvironmentNotFoundError: unknown ``env_name`` (message lists close matches).
        UserError: unknown backend, bad argument, or a missing optional dependency.
    """
    _check_arguments(backend, num_parallel_environments, max_episode_steps, env_id_offset,
                     num_threads)
    spec = find_env_spec(env_name)
    atari, max_episode_steps = _resolve_atari(env_name, spec, atari, max_episode_steps)
    request = _request(env_name, num_parallel_environments, seed, env_kwargs, gym_wrappers,
                       render_mode, max_episode_steps, atari, env_id_offset, num_threads)
    if check_env:
        check_environment(request)
    if backend == "auto":
        backend = _backends.select_auto_backend(request, spec)
    return _build(backend, request, report_executed_action, check_values)


def _request(env_name: str, num_envs: int, seed: int, env_kwargs: Optional[dict],
             gym_wrappers: Sequence[Callable], render_mode: Optional[str],
             max_episode_steps: Optional[int], atari: Optional[AtariOptions],
             env_id_offset: int, num_threads: Optional[int]) -> "_backends.EnvRequest":
    """The :class:`EnvRequest` of :func:`create_environment`'s (checked) arguments."""
    return _backends.EnvRequest(
        env_name=env_name, num_envs=int(num_envs), seed=int(seed),
        env_kwargs=dict(env_kwargs or {}),
        gym_wrappers=tuple(_with_gin_bindings(w) for w in gym_wrappers),
        render_mode=render_mode,
        max_episode_steps=None if max_episode_steps is None else int(max_episode_steps),
        atari=atari, env_id_offset=int(env_id_offset),
        num_threads=None if num_threads is None else int(num_threads))


def _build(backend: str, request: "_backends.EnvRequest", report_executed_action: bool,
           check_values: bool = False) -> AlfEnvironment:
    """The env ``backend`` builds for ``request`` (its options and optional packages
    checked first), reporting executed actions if asked (closed again if that fails), its
    values checked for NaN/inf if asked (a :class:`GymVectorEnvironment`'s)."""
    _backends.check_backend_request(backend, request)
    try:
        env = _backends.get_backend(backend).builder(request)
    except gym.error.DependencyNotInstalled as e:
        raise UserError(f"Environment '{request.env_name}' needs an optional dependency: "
                        f"{e}") from None
    if report_executed_action:
        try:
            env.report_executed_action()
        except BaseException:
            env.close()
            raise
    if check_values and isinstance(env, GymVectorEnvironment):
        env.check_finite_values()
    return env


def _check_arguments(backend: str, num_parallel_environments: int,
                     max_episode_steps: Optional[int], env_id_offset: int,
                     num_threads: Optional[int]) -> None:
    """One UserError for an argument of :func:`create_environment` out of range (from
    Python; gin bindings are checked earlier, with their file and line)."""
    if backend != "auto":
        _backends.get_backend(backend)  # UserError listing the valid names
    if int(num_parallel_environments) < 1:
        raise UserError(f"num_parallel_environments must be >= 1, got {num_parallel_environments}.")
    if max_episode_steps is not None and int(max_episode_steps) < 1:
        raise UserError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps}.")
    if int(env_id_offset) < 0:
        raise UserError(f"create_environment: env_id_offset must be >= 0, got {env_id_offset}.")
    if num_threads is not None and int(num_threads) < 0:
        raise UserError(f"create_environment: num_threads must be >= 0 (0: the engine's "
                        f"default) or None, got {num_threads}.")


def _resolve_atari(env_name: str, spec: Any, atari: Optional[AtariOptions],
                   max_episode_steps: Optional[int]
                   ) -> Tuple[Optional[AtariOptions], Optional[int]]:
    """``(atari options, max_episode_steps)`` for the env: an Atari id gets the
    gin-configured options unless given, and its step limit becomes a frame limit of the
    preprocessing; any other id must not get Atari options."""
    if is_atari_spec(spec):
        atari = atari if atari is not None else atari_options()
        if not isinstance(atari, AtariOptions):
            raise UserError(f"create_environment: atari must be an AtariOptions (e.g. "
                            f"@atari_options() in gin), got {atari!r}.")
        if max_episode_steps is not None and atari.preprocessing:
            atari = dataclasses.replace(
                atari, max_episode_frames=int(max_episode_steps) * atari.frame_skip)
            max_episode_steps = None
    elif atari is not None:
        raise UserError(f"create_environment: atari options were given for '{env_name}', which "
                        "is not an Atari (ALE) game.")
    return atari, max_episode_steps
