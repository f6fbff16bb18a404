"""What every unroller returns to the learner, and the interface it offers the Trainer."""
from typing import Any, Callable, NamedTuple, Optional, Protocol

from alf.data_structures import Experience
from alf.metrics import EpisodeMetrics


class UnrollResult(NamedTuple):
    """One unroll, as the learner sees it.

    Attributes:
        experience: time-major ``Experience [T, B]`` (``bootstrap_last`` False: every
            step is new) or ``[T + 1, B]`` (``bootstrap_last`` True: steps ``0..T-1`` are
            new and step ``T`` is the bootstrap step, re-sent as step 0 of the env's next
            unroll). ``time_step.env_id [.., B]`` names each column's env (global ids:
            several env groups carry offsets).
        env_steps: new env steps in ``experience`` (``T * B``).
        bootstrap_last: see ``experience``.
        policy_versions: ``[B]`` int64, the learner version of the weights each column
            was collected with (None for the sync unroller: always the current one).
    """
    experience: Experience
    env_steps: int
    bootstrap_last: bool = False
    policy_versions: Any = None


PolicyStep = Callable[..., Any]


class Unroller(Protocol):
    """The Trainer-owned source of experience (sync in-process, async workers, ...)."""

    @property
    def metrics(self) -> EpisodeMetrics:
        """Finished-episode metrics of the training envs (raw rewards)."""

    @property
    def batch_size(self) -> int:
        """Env rows ``B`` (all env groups together): the replay buffer's row count."""

    def collect(self, policy_step: PolicyStep, unroll_length: int,
                action_override: Optional[Callable[[Any], Any]] = None) -> UnrollResult:
        """The next unroll (see :class:`UnrollResult`)."""

    def after_train_iter(self, algorithm: Any) -> None:
        """Called by the Trainer after each iteration (async: publish weights when due)."""

    def seed(self, seed: int) -> None:
        """Seed the envs' next episodes (used on resume)."""

    def close(self) -> None:
        """Release envs, processes and shared memory (idempotent)."""
