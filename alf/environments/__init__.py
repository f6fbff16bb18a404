"""Gymnasium environments as batched :class:`alf.data_structures.TimeStep` producers.

Entry point: :func:`create_environment` (gin-configurable). Importing this
package registers the configurables ``create_environment``,
``async_env_backend``, ``ale_vector_env_backend``, ``envpool_env_backend``,
``atari_options`` (Atari preprocessing, :mod:`alf.environments.atari`) and the
gym wrappers ``MaskVelocityWrapper`` and ``StepLatencyWrapper``.
"""
from alf.environments.alf_environment import AlfEnvironment
from alf.environments.atari import AtariOptions, atari_options
# defines the gin configurables ale_vector_env_backend / envpool_env_backend (registers no backend)
from alf.environments import atari_backends  # noqa: F401  pylint: disable=unused-import
from alf.environments.backends import (Backend, EnvRequest, backend_names, get_backend,
                                      register_backend, unregister_backend)
from alf.environments.factory import create_environment
from alf.environments.gym_environment import GymVectorEnvironment
from alf.environments.wrappers import MaskVelocityWrapper, StepLatencyWrapper

__all__ = [
    "AlfEnvironment", "AtariOptions", "Backend", "EnvRequest", "GymVectorEnvironment",
    "MaskVelocityWrapper", "StepLatencyWrapper", "atari_options", "backend_names",
    "create_environment", "get_backend", "register_backend", "unregister_backend",
]
