"""What an experiment needs to know about its env, without the env: :class:`EnvSpecs`.

A data type of the environment layer, so that code below the experiment (pure offline
training reads the specs of a dataset: :func:`alf.datasets.offline_buffer.dataset_env_specs`)
can make one without importing :mod:`alf.experiment` (``docs/design/layers.md``).
"""
from typing import Any, NamedTuple

from alf.data_structures import TimeStep


class EnvSpecs(NamedTuple):
    """What an experiment needs to know about its env (no env object required)."""
    observation_spec: Any
    action_spec: Any
    reward_spec: Any
    time_step_spec: TimeStep
    env_name: str = ""

    @staticmethod
    def of(env: Any) -> "EnvSpecs":
        """The specs of a built :class:`alf.environments.AlfEnvironment`."""
        return EnvSpecs(env.observation_spec(), env.action_spec(), env.reward_spec(),
                        env.time_step_spec(), env.env_name)
