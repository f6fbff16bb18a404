"""How many torch threads a run may use (see :mod:`alf.utils.cpu_budget`)."""
import os
from typing import Any, Callable, Sequence

from alf.utils.cpu_budget import ThreadGovernor, usable_cpus


def run_thread_governor(config: Any, rank_group: Any,
                        child_pids: Callable[[], Sequence[int]]) -> ThreadGovernor:
    """The :class:`ThreadGovernor` of a run's torch threads (``config``: its TrainerConfig;
    ``child_pids``: its env worker processes, whose CPU is the run's own).

    The thread count is fixed for the run in every mode (float results depend on it);
    ``adapt_threads`` narrows the CPUs the run's threads run on, which changes no result,
    so the async deterministic mode adapts too. Under torchrun the ranks of one host
    split its CPUs evenly and keep their share (each rank's count is its share)."""
    maximum = config.num_threads
    adaptive = config.adapt_threads
    if rank_group is not None:
        share = max(1, usable_cpus() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
        maximum = min(int(maximum), share) if maximum else share
        adaptive = False
    return ThreadGovernor(maximum, adaptive=adaptive, child_pids=child_pids)
