"""Environment backends: how ``B`` copies of an env are built and stepped.

A backend is a :class:`Backend`: a builder ``(EnvRequest) -> AlfEnvironment``,
an optional ``check`` of the request's options and the optional packages it
``requires``. The built-in ones are an explicit table,
:func:`builtin_backends`; nothing is registered as a side effect of an import,
so a fresh subprocess that imports only :mod:`alf.environments.factory` has
every built-in backend. :func:`register_backend` is the extension point for
users (a faster engine is one function plus ``register_backend(name, fn)``);
:func:`get_backend` looks a name up (user registrations first) and
:func:`backend_names` lists them. :func:`check_backend_request` runs a
backend's check first and only then looks for its packages (without importing
them), so a bad option gives the same error whether or not the package is
installed.

Built-in backends (all gymnasium 1.x, NEXT_STEP autoreset):

- ``"vector"``: the env's native vectorised implementation
  (``gym.make_vec(..., vectorization_mode="vector_entry_point")``, e.g.
  ``CartPoleVectorEnv``): one numpy computation for all envs, the fastest.
- ``"sync"``: ``gymnasium.vector.SyncVectorEnv``, envs stepped in a loop in
  this process. Best for cheap envs without a vector implementation.
- ``"async"``: ``gymnasium.vector.AsyncVectorEnv`` with shared-memory
  observations, one subprocess per env. Best for expensive envs (Atari,
  MuJoCo). Its workers exit quietly when this process dies
  (:mod:`alf.environments.async_worker`). Works with the ``fork`` (default on Linux), ``forkserver`` and
  ``spawn`` start methods: env factories are ``functools.partial`` s of the
  module-level :func:`make_single_env`, so they pickle by reference.

Atari (ALE) ids get the preprocessing of :mod:`alf.environments.atari` on
every backend; the C++ Atari engines ``"ale_vector"`` (what ``"auto"`` picks
for them) and ``"envpool"`` live in :mod:`alf.environments.atari_backends`,
which this module imports (the request type both use is
:mod:`alf.environments.env_request`, so the import goes one way only).
"""
import dataclasses
import functools
import importlib.util
import inspect
import multiprocessing
from typing import Any, Callable, Dict, List, Optional, Tuple

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, load_env_creator
from gymnasium.vector import AutoresetMode

from alf.config import configurable
from alf.environments import atari_backends as atari
from alf.environments.alf_environment import AlfEnvironment
from alf.environments.async_worker import NamedErrorsAsyncVectorEnv, make_async_worker
from alf.environments.atari import is_atari_spec, life_loss_hook, make_atari_env
from alf.environments.env_errors import EnvErrorWrapper, env_label
from alf.environments.env_ids import find_env_spec
from alf.environments.env_request import EnvRequest
from alf.environments.gym_environment import GymVectorEnvironment
from alf.environments.thread_vector_env import ThreadVectorEnv
from alf.environments.vector_reward import carry_vector_reward
from alf.errors import RunFailedError, UserError


def make_single_env(request: EnvRequest, index: int) -> gym.Env:
    """Build sub-env ``index``: ``gym.make`` + ``request.gym_wrappers`` (applied in order).

    Atari ids with ``request.atari`` set are built by
    :func:`alf.environments.make_atari_env` (preprocessing wrappers)
    before the ``gym_wrappers``. An env with a vector reward (``reward_space`` of shape
    ``(d,)``) is wrapped in :class:`~alf.environments.vector_reward.VectorRewardToInfo`, and
    every env last in :class:`~alf.environments.env_errors.EnvErrorWrapper` (an exception
    of its ``reset()``/``step()`` becomes one line naming the env, its index and step).
    Its action/observation space samplers are
    seeded with ``seed + env_id_offset + index``; the env itself is seeded by
    the vector env's first ``reset(seed=seed + env_id_offset)``.
    """
    find_env_spec(request.env_name)  # registers e.g. ALE ids in a fresh worker process
    if request.atari is not None:
        env = make_atari_env(request.env_name, request.atari, request.env_kwargs,
                                   request.render_mode, request.max_episode_steps)
    else:
        kwargs = dict(request.env_kwargs)
        if request.max_episode_steps is not None:
            kwargs["max_episode_steps"] = request.max_episode_steps
        if request.render_mode is not None:
            kwargs["render_mode"] = request.render_mode
        env = gym.make(request.env_name, **kwargs)
    for wrapper in request.gym_wrappers:
        wrapped = _apply_wrapper(wrapper, env)
        if not isinstance(wrapped, gym.Env):
            raise UserError(
                f"create_environment.gym_wrappers: {_callable_name(wrapper)}(env) returned "
                f"{type(wrapped).__name__ if wrapped is not None else 'None'}, not a gymnasium "
                "Env: a wrapper must return the wrapped env (e.g. `return "
                "gym.wrappers.ClipReward(env, -1, 1)`, or a gym.Wrapper subclass)")
        env = wrapped
    env = carry_vector_reward(env)  # a [d] reward rides in info (alf/environments/vector_reward.py)
    # outermost: an exception of the env's own reset()/step() during the run is one line
    env = EnvErrorWrapper(env, env_label(request.env_name, index, request.num_envs,
                                         request.env_id_offset))
    env.action_space.seed(request.seed + request.env_id_offset + index)
    env.observation_space.seed(request.seed + request.env_id_offset + index)
    return env


def _apply_wrapper(wrapper: Callable, env: gym.Env) -> Any:
    """``wrapper(env)``; an exception of the wrapper is one line naming it (not the env's
    ``gym.make()``), its own message last."""
    try:
        return wrapper(env)
    except (UserError, RunFailedError):
        raise
    except Exception as e:  # noqa: BLE001 - the user's wrapper: named, then re-raised
        text = " ".join(str(e).split("\n  In call to configurable")[0].split())
        raise UserError(f"create_environment.gym_wrappers: {_callable_name(wrapper)}(env) "
                        f"raised {type(e).__name__}: {text or '(no message)'}") from e


def _callable_name(fn: Callable) -> str:
    """``fn``'s name for a message (through ``functools.partial``, gin's bindings)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__name__", type(fn).__name__)


def _env_fns(request: EnvRequest):
    return [functools.partial(make_single_env, request, i) for i in range(request.num_envs)]


# ------------------------------------------------------------------ vector
# Vector entry points known to return freshly allocated observation arrays
# and to honour NEXT_STEP autoreset exactly (reward 0, not done on reset rows);
# any other one gets defensive copies and the contract re-imposed.
_TRUSTED_ENTRY_POINTS = {"gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"}


def _vector_kwargs(request: EnvRequest) -> Dict[str, Any]:
    kwargs = dict(request.env_kwargs)
    if request.max_episode_steps is not None:
        kwargs["max_episode_steps"] = request.max_episode_steps
    if request.render_mode is not None:
        kwargs["render_mode"] = request.render_mode
    return kwargs


def vector_backend_problem(request: EnvRequest, spec: EnvSpec) -> Optional[str]:
    """Why ``request`` cannot use the ``"vector"`` backend, or None if it can."""
    if spec.vector_entry_point is None:
        return f"'{spec.id}' has no native vector implementation (vector_entry_point)"
    if request.gym_wrappers:
        return "gym_wrappers are applied to each sub-env, which a native vector env does not have"
    if spec.additional_wrappers:
        return f"'{spec.id}' is registered with additional wrappers"
    try:
        creator = (spec.vector_entry_point if callable(spec.vector_entry_point)
                   else load_env_creator(spec.vector_entry_point))
    except Exception as e:  # noqa: BLE001 - e.g. jax missing for phys2d envs
        return f"its vector entry point cannot be loaded ({e})"
    params = inspect.signature(creator).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        bad = sorted(k for k in _vector_kwargs(request) if k not in params)
        if bad:
            return (f"its vector env {getattr(creator, '__name__', creator)} does not accept "
                    f"{', '.join(bad)} (it accepts: {', '.join(p for p in params if p != 'num_envs')})")
    if request.render_mode is not None:
        modes = getattr(creator, "metadata", {}).get("render_modes", [])
        if request.render_mode not in modes:
            return f"its vector env cannot render in mode '{request.render_mode}' (only {modes})"
    return None


def vector_backend(request: EnvRequest) -> AlfEnvironment:
    """``gym.make_vec(..., vectorization_mode="vector_entry_point")`` as an AlfEnvironment.

    Atari ids (with ``request.atari``) go to :func:`ale_vector_backend`, which
    builds their native vector env with alf's preprocessing.
    """
    if request.atari is not None:
        return atari.ale_vector_backend(request)
    spec = find_env_spec(request.env_name)
    problem = vector_backend_problem(request, spec)
    if problem is not None:
        raise UserError(f"backend='vector' cannot build '{request.env_name}': {problem}. "
                        "Use backend='sync' or 'async' (or 'auto').")
    kwargs = _vector_kwargs(request)
    ep = spec.vector_entry_point
    creator = ep if callable(ep) else load_env_creator(ep)
    if "autoreset_mode" in inspect.signature(creator).parameters:
        kwargs["autoreset_mode"] = AutoresetMode.NEXT_STEP
    env = gym.make_vec(request.env_name, num_envs=request.num_envs,
                       vectorization_mode="vector_entry_point", **kwargs)
    trusted = ep in _TRUSTED_ENTRY_POINTS
    return GymVectorEnvironment(env, request.env_name, request.seed,
                                copy_observations=not trusted, enforce_autoreset=not trusted,
                                env_id_offset=request.env_id_offset)


# ------------------------------------------------------ sync/threads/async
def sync_backend(request: EnvRequest) -> AlfEnvironment:
    """``SyncVectorEnv`` of :func:`make_single_env` sub-envs, in this process."""
    env = gym.vector.SyncVectorEnv(_env_fns(request), copy=True,
                                   autoreset_mode=AutoresetMode.NEXT_STEP)
    return GymVectorEnvironment(env, request.env_name, request.seed, enforce_autoreset=False,
                                info_hook=life_loss_hook(request.atari),
                                env_id_offset=request.env_id_offset)


def threads_backend(request: EnvRequest) -> AlfEnvironment:
    """:class:`ThreadVectorEnv` of :func:`make_single_env` sub-envs: ``"sync"``'s semantics,
    the sub-env steps run concurrently on one thread per env (for latency-bound envs)."""
    env = ThreadVectorEnv(_env_fns(request), copy=True, autoreset_mode=AutoresetMode.NEXT_STEP)
    return GymVectorEnvironment(env, request.env_name, request.seed, enforce_autoreset=False,
                                info_hook=life_loss_hook(request.atari),
                                env_id_offset=request.env_id_offset)


@configurable
def async_env_backend(request: EnvRequest, context: Optional[str] = None,
                      step_timeout: Optional[float] = None,
                      close_timeout: float = 10.0) -> AlfEnvironment:
    """``AsyncVectorEnv`` (one subprocess per env, shared-memory observations).

    Workers run :func:`alf.environments.async_worker.async_worker`: when this
    process dies (even by SIGKILL) they close their env and exit quietly, no
    traceback, within a second. They are daemonic, so this process must not
    be a daemonic ``multiprocessing`` process itself (refused with a
    :class:`UserError`): an actor process that builds ``async`` envs must be
    started with ``daemon=False``.

    Args:
        request: what to build.
        context: multiprocessing start method: None (platform default), 'fork',
            'forkserver' or 'spawn'.
        step_timeout: seconds a step may take before ``multiprocessing.TimeoutError``.
        close_timeout: seconds ``close()`` waits for workers before terminating them.
    """
    if multiprocessing.current_process().daemon:
        raise UserError(f"backend='async' cannot start env processes from the daemonic process "
                        f"'{multiprocessing.current_process().name}' (daemonic processes may not "
                        "have children); start that process with daemon=False, or use "
                        "backend='sync'.")
    env = NamedErrorsAsyncVectorEnv(_env_fns(request), shared_memory=True, copy=True,
                                    context=context, daemon=True, worker=make_async_worker(),
                                    autoreset_mode=AutoresetMode.NEXT_STEP)
    return GymVectorEnvironment(env, request.env_name, request.seed,
                                step_timeout=step_timeout, close_timeout=close_timeout,
                                enforce_autoreset=False,
                                info_hook=life_loss_hook(request.atari),
                                env_id_offset=request.env_id_offset)


def async_backend(request: EnvRequest) -> AlfEnvironment:
    """The ``"async"`` backend; knobs are bound on ``async_env_backend`` in gin."""
    return async_env_backend(request)


RequestCheck = Callable[[EnvRequest], object]  # raises UserError; return value ignored


@dataclasses.dataclass(frozen=True)
class Backend:
    """One backend: how to build a request, and what to verify before building.

    Attributes:
        builder: ``(EnvRequest) -> AlfEnvironment``.
        check: ``check(request)`` raises a :class:`UserError` naming the option
            when ``builder`` cannot honour ``request``; it must not import the
            ``requires`` packages (it runs before they are looked for).
        requires: ``(module, extra)`` pairs: optional packages the builder
            imports, and the ``setup.py`` extra that installs each.
    """
    builder: Callable[[EnvRequest], AlfEnvironment]
    check: Optional[RequestCheck] = None
    requires: Tuple[Tuple[str, str], ...] = ()


def builtin_backends() -> Dict[str, Backend]:
    """The built-in backends by name (a fresh dict: changing it changes nothing).

    ``vector``, ``sync``, ``threads``, ``async`` (this module) and the C++ Atari engines
    ``ale_vector`` and ``envpool`` (:mod:`alf.environments.atari_backends`,
    imported here, which imports none of their optional packages).
    """
    return {
        "vector": Backend(vector_backend),
        "sync": Backend(sync_backend),
        "threads": Backend(threads_backend),
        "async": Backend(async_backend),
        "ale_vector": Backend(atari.ale_vector_backend, check=atari.check_ale_vector_request,
                              requires=(("ale_py", "atari"),)),
        "envpool": Backend(atari.envpool_backend, check=atari.check_envpool_request,
                           requires=(("envpool", "envpool"),)),
    }


_USER_BACKENDS: Dict[str, Backend] = {}
"""Backends added by :func:`register_backend` calls (the user extension
point); empty until a user registers one. Looked up before the built-ins."""


def register_backend(name: str, builder: Callable[[EnvRequest], AlfEnvironment],
                     overwrite: bool = False, check: Optional[RequestCheck] = None,
                     requires: Tuple[Tuple[str, str], ...] = ()) -> None:
    """Make ``create_environment(backend=name)`` call ``builder(request)``.

    The registration lives in this process only: a process that rebuilds the
    experiment from its config (e.g. an async actor started with ``spawn``)
    must import the module that registers the backend again.

    Args:
        name: the backend name (not ``"auto"``).
        builder: ``(EnvRequest) -> AlfEnvironment``.
        overwrite: replace an existing backend of that name (a built-in one too).
        check: ``check(request)`` raises a :class:`UserError` naming the option
            when ``builder`` cannot honour ``request``. It must not import
            ``requires`` packages: it runs before they are looked for.
        requires: ``(module, extra)`` pairs: optional packages the builder
            imports, and the ``setup.py`` extra that installs each
            (``pip install -e ".[extra]"`` is what the error suggests).

    Raises:
        ValueError: ``name`` is ``"auto"``, or exists and ``overwrite`` is False.
    """
    if name == "auto" or (name in backend_names() and not overwrite):
        raise ValueError(f"backend '{name}' already exists")
    _USER_BACKENDS[name] = Backend(builder, check, tuple(requires))


def unregister_backend(name: str) -> None:
    """Remove a backend added with :func:`register_backend` (a built-in one reappears)."""
    if name not in _USER_BACKENDS:
        raise ValueError(f"backend '{name}' was not added with register_backend")
    del _USER_BACKENDS[name]


def backend_names() -> List[str]:
    """Every backend name ``create_environment`` accepts besides ``"auto"``, sorted."""
    return sorted(set(builtin_backends()) | set(_USER_BACKENDS))


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (a user registration wins over a built-in).

    Raises:
        UserError: unknown name (the message lists the valid ones).
    """
    if name in _USER_BACKENDS:
        return _USER_BACKENDS[name]
    builtin = builtin_backends()
    if name in builtin:
        return builtin[name]
    raise UserError(f"Unknown environment backend '{name}'. Valid choices: "
                    f"{', '.join(['auto'] + backend_names())}.")


def check_backend_request(backend: str, request: EnvRequest) -> None:
    """Raise the :class:`UserError` that building ``request`` with ``backend`` would fail with.

    Imports no optional package. First the backend's ``check`` of the
    request's options, then its ``requires`` packages (looked up with
    ``importlib.util.find_spec``): an unsupported option is reported the same
    way whether or not the package is installed, and the missing-package
    message is only given for a request the backend could otherwise build.
    """
    needs = get_backend(backend)
    if needs.check is not None:
        needs.check(request)
    for module, extra in needs.requires:
        if importlib.util.find_spec(module) is None:
            raise UserError(f"backend='{backend}' needs {module}, which is not installed. "
                            f'Install it with: pip install -e ".[{extra}]"')


def select_auto_backend(request: EnvRequest, spec: EnvSpec) -> str:
    """The backend ``"auto"`` resolves to.

    - Atari ids (``request.atari`` set): ``"ale_vector"``, the fastest, unless
      the request needs a per-env backend (``render_mode``, ``gym_wrappers``,
      ``env_kwargs``, ``preprocessing=False`` or ``fire_after_life_loss``):
      then ``"sync"``. Every Atari backend preprocesses identically, so this
      choice never changes what the agent observes.
    - An Atari id in a hand-made request without ``atari`` options (the plain
      gymnasium env): ``"sync"``.
    - Otherwise ``"vector"`` when the env has a usable native vector
      implementation, else ``"sync"``.
    """
    if request.atari is not None:
        return "ale_vector" if atari.atari_vector_problem(request, "ale_vector") is None else "sync"
    if is_atari_spec(spec) or spec.namespace == "ALE":
        return "sync"
    return "vector" if vector_backend_problem(request, spec) is None else "sync"

