"""What every unroller returns to the learner."""
from typing import Any, NamedTuple

from alf.data_structures import Experience


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
