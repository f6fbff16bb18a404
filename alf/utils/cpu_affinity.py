"""Which CPUs a process's threads may run on: per-CPU load, and moving every thread at once.

The thread governor (:mod:`alf.utils.cpu_budget`) gives CPUs back to other jobs by
narrowing the CPUs this process's threads may run on, never by changing torch's thread
count: torch splits a reduction or a convolution's weight gradient into as many parts
as it has threads, so the count changes the float result (measured: ``x.sum()`` of 1M
floats and a Nature-CNN weight gradient differ between 1, 2 and 3 threads), while the
CPUs the same threads run on do not (identical with 2 threads on CPUs {0, 1}, {0} or
{1}). See docs/design/thread_budget.md.

Linux only (``sched_setaffinity`` on every ``/proc/<pid>/task`` entry: the call moves a
single thread). Elsewhere every function is a no-op that says so by its return value.
"""
import os
from typing import Dict, Iterable, List, Optional, Sequence


def current_affinity(pid: int = 0) -> List[int]:
    """The CPUs thread/process ``pid`` (0: the calling thread) may run on, sorted."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def busy_ticks_per_cpu(cpus: Iterable[int]) -> Optional[Dict[int, float]]:
    """Clock ticks each of ``cpus`` has spent busy (not idle / iowait) since boot, from
    ``/proc/stat``; None where it cannot be read."""
    wanted = {f"cpu{c}": c for c in cpus}
    busy: Dict[int, float] = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                if not line.startswith("cpu") or line.startswith("cpu "):
                    continue
                fields = line.split()
                cpu = wanted.get(fields[0])
                if cpu is None:
                    continue
                ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
                busy[cpu] = float(sum(ticks) - ticks[3] - ticks[4])
    except (OSError, ValueError, IndexError):
        return None
    return busy or None


def _task_ids(pid: Optional[int]) -> List[int]:
    """Thread ids of process ``pid`` (None: this process); [] if it is gone."""
    path = "/proc/self/task" if pid is None else f"/proc/{pid}/task"
    try:
        return [int(t) for t in os.listdir(path)]
    except (OSError, ValueError):
        return []


def pin_process(cpus: Sequence[int], pid: Optional[int] = None) -> bool:
    """Let every thread of process ``pid`` (None: this one) run on ``cpus`` only.

    Threads started later inherit the mask of the thread that starts them, so torch's
    OpenMP pools created afterwards follow too. A thread that ends meanwhile is skipped.

    Returns:
        False where affinity cannot be set (not Linux, or not permitted), else True.
    """
    if not hasattr(os, "sched_setaffinity"):
        return False
    mask = set(int(c) for c in cpus)
    tids = _task_ids(pid)
    if not tids:
        return False
    moved = False
    for tid in tids:
        try:
            os.sched_setaffinity(tid, mask)
            moved = True
        except ProcessLookupError:
            continue  # a thread that just ended
        except OSError:
            return False
    return moved


def least_busy(candidates: Sequence[int], count: int, busy_s: Dict[int, float],
               own_s: float, current: Sequence[int]) -> List[int]:
    """The ``count`` CPUs of ``candidates`` that other processes kept least busy.

    Args:
        candidates: the CPUs to choose from (the run's launch mask).
        count: how many to return (1 .. len(candidates)).
        busy_s: CPU -> busy seconds per second over the last period (everyone's).
        own_s: this process's CPU seconds per second over the same period, spread
            evenly over ``current`` (where it was allowed to run) and subtracted there.
        current: the CPUs this process ran on over that period.

    The current CPUs are kept unless the best choice is less busy by half a CPU or more
    (no move on noise, and two runs that measured the same moment do not chase each
    other); ties among the others are broken by this process's id, so two runs that
    narrow at the same moment spread over the CPUs instead of both taking the lowest.
    """
    share = own_s / max(1, len(current))
    mine = set(current)
    count = max(1, min(count, len(candidates)))
    salt = os.getpid()

    def others(cpu: int) -> float:
        return max(0.0, busy_s.get(cpu, 0.0) - (share if cpu in mine else 0.0))

    ranked = sorted(candidates, key=lambda c: (others(c), (c + salt) % len(candidates)))
    best = sorted(ranked[:count])
    if len(mine) == count and mine <= set(candidates):
        kept = sorted(mine)
        if sum(others(c) for c in kept) - sum(others(c) for c in best) < 0.5:
            return kept
    return best
