"""``AsyncSettings``: the slice of ``TrainerConfig`` the async unroller reads.

Field names and meanings are ``TrainerConfig``'s (see its docstring), so messages
that name ``TrainerConfig.<field>`` stay true; :meth:`AsyncSettings.from_config`
reads them by name (this layer does not import :mod:`alf.trainers`).
"""
from dataclasses import dataclass
from typing import Any, Optional

from alf.unrollers.env_worker import ActorSettings
from alf.utils.config_slice import config_slice


@dataclass(frozen=True)
class AsyncSettings:
    """How experience is collected in env worker processes (``TrainerConfig`` fields)."""
    async_mode: str = "processes"
    num_env_workers: int = 1
    env_groups_per_worker: int = 2
    env_worker_threads: int = 1
    unroll_length: float = 8
    max_unroll_length: int = 0
    unroll_queue_size: int = 8
    unroll_parameter_update_period: int = 10
    max_policy_lag: Optional[int] = None
    env_worker_timeout_s: float = 60.0
    max_env_worker_restarts: int = 5
    initial_collect_steps: int = 0
    overwrite_policy_output: bool = False
    metric_buffer_size: int = 20
    random_seed: Optional[int] = None
    num_policy_workers: Optional[int] = None
    device: str = "cpu"

    @classmethod
    def from_config(cls, config: Any) -> "AsyncSettings":
        """The fields of a ``TrainerConfig`` (a missing one keeps its default)."""
        return config_slice(cls, config)

    @property
    def update_period(self) -> int:
        """Iterations between weight publications (at least 1)."""
        return max(1, int(self.unroll_parameter_update_period))

    def actor_settings(self) -> ActorSettings:
        """What each env worker reads of these."""
        return ActorSettings(deterministic=self.async_mode == "deterministic",
                             update_period=self.update_period,
                             num_threads=int(self.env_worker_threads),
                             initial_collect_steps=int(self.initial_collect_steps),
                             overwrite_policy_output=bool(self.overwrite_policy_output))
