"""How many torch threads a run may use (see :mod:`alf.utils.cpu_budget`)."""
import os
from typing import Any, Callable, Sequence

from alf.utils.cpu_budget import ThreadGovernor, usable_cpus


def run_thread_governor(config: Any, rank_group: Any,
                        child_pids: Callable[[], Sequence[int]]) -> ThreadGovernor:
    """The :class:`ThreadGovernor` of a run's torch threads (``config``: its TrainerConfig;
    ``child_pids``: its env worker processes, whose CPU is the run's own).

    Under torchrun the ranks of one host split its CPUs evenly and pin their share
    (ranks that picked different thread counts could round differently and drift
    apart); the async deterministic mode pins too (bit-identical reruns)."""
    maximum = config.num_threads
    adaptive = config.adapt_threads and not (config.async_unroll and
                                             config.async_mode == "deterministic")
    if rank_group is not None:
        share = max(1, usable_cpus() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
        maximum = min(int(maximum), share) if maximum else share
        adaptive = False
    return ThreadGovernor(maximum, adaptive=adaptive, child_pids=child_pids)
