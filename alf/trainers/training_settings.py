"""``TrainingSettings``: the slice of ``TrainerConfig`` the Learner (and an algorithm's
:meth:`~alf.algorithms.rl_algorithm.RLAlgorithm.check_training_config`) reads.

The Learner is handed these fields, not the whole ``TrainerConfig`` (whose other
fields are about checkpoints, evaluation, threads, torchrun ...): what it depends on is
written here, typed, and a test or notebook can build a Learner from a few
keywords (``TrainingSettings(unroll_length=4, mini_batch_size=32)``). Field names
and defaults are ``TrainerConfig``'s, so error messages that name
``TrainerConfig.<field>`` stay true.
"""
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Union

from alf.utils.config_slice import config_slice

Schedule = Union[float, Callable[[float], float]]


@dataclass(frozen=True)
class TrainingSettings:
    """How one algorithm is trained (see ``TrainerConfig`` for each field's meaning)."""
    unroll_length: float = 8
    async_unroll: bool = False
    max_policy_lag: Optional[int] = None
    initial_collect_steps: int = 0
    overwrite_policy_output: bool = False
    num_updates_per_train_iter: int = 4
    mini_batch_size: Optional[int] = None
    mini_batch_length: int = 1
    update_counter_every_mini_batch: bool = False
    whole_replay_buffer_training: Optional[bool] = None
    clear_replay_buffer: Optional[bool] = None
    replay_buffer_length: Optional[int] = None
    priority_replay: bool = False
    priority_replay_alpha: float = 0.7
    priority_replay_beta: Schedule = 0.4
    priority_replay_eps: float = 1e-6
    offline_buffer_dir: Union[None, str, List[str]] = None
    offline_buffer_length: Optional[int] = None
    offline_buffer_check_values: bool = True
    offline_fraction: Schedule = 0.5
    rl_train_after_update_steps: int = 0
    rl_train_every_update_steps: int = 1
    metric_buffer_size: int = 20
    learner_thread: bool = False
    learner_queue_size: int = 2
    learner_queue_timeout_s: float = 600.0

    @classmethod
    def from_config(cls, config: Any) -> "TrainingSettings":
        """The fields of a ``TrainerConfig`` (or any object with them; a missing one keeps
        its default)."""
        return config_slice(cls, config)
