"""The request every environment backend builds from: :class:`EnvRequest`.

Its own module so that :mod:`alf.environments.backends` (the table of backends) and the
backends it lists (:mod:`alf.environments.atari_backends`) share it without importing
each other: ``env_request`` < ``atari_backends`` < ``backends``.
"""
import dataclasses
from typing import Any, Callable, Mapping, Optional, Tuple

import gymnasium as gym

from alf.environments.atari import AtariOptions


@dataclasses.dataclass(frozen=True)
class EnvRequest:
    """Everything a backend needs to build ``num_envs`` copies of an environment.

    Picklable (module-level dataclass of plain values, wrapper classes and
    partials), so it can be shipped to ``spawn``/``forkserver`` workers.
    """
    env_name: str
    num_envs: int = 1
    seed: int = 0
    env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    gym_wrappers: Tuple[Callable[[gym.Env], gym.Env], ...] = ()
    render_mode: Optional[str] = None
    max_episode_steps: Optional[int] = None
    atari: Optional[AtariOptions] = None
    """Atari preprocessing/life options (:mod:`alf.environments.atari`); set by
    ``create_environment`` for Atari ids, None otherwise (None for an Atari id
    in a hand-made request: the plain gymnasium env, no alf preprocessing)."""
    env_id_offset: int = 0
    """Sub-env ``i`` has ``TimeStep.env_id`` ``env_id_offset + i`` and seed
    ``seed + env_id_offset + i`` (one env group of several)."""
    num_threads: Optional[int] = None
    """C++ thread-pool size for ``ale_vector``/``envpool`` (0: the engine's
    default); None: the backend's gin-configured ``num_threads``. Backends
    without a thread pool ignore it."""
