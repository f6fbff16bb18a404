"""How many CPUs this process may use, how busy they are, and how a run shares them.

Researchers run several seeds on one machine. A torch (OpenMP) thread pool
sized for the whole machine, next to another CPU-bound process, loses a core
every time the scheduler runs the neighbour: each parallel region then waits
for its descheduled thread (and, with OpenMP's default wait policy, its other
threads spin on the core the neighbour wants). Measured on 2 cores
(``bench/contention.py``): ``sac_pendulum.gin`` with 2 torch threads next to
one busy loop took 123 s for what takes 21 s alone; a small MLP update took 72 s
vs 3.5 s. Three measures, all here:

- :func:`prefer_yielding_thread_pools` (called by ``import alf`` before torch
  loads): an idle OpenMP thread spins only briefly before it sleeps
  (``GOMP_SPINCOUNT=1000``, ``KMP_BLOCKTIME=1``) instead of libgomp's long spin,
  unless the user chose a wait policy;
- :func:`usable_cpus`: the CPUs this process may run on: its affinity mask,
  capped by a cgroup CPU quota (a container limited to 2 CPUs of a 64-core
  host gets 2, where torch would start 64 threads);
- :class:`ThreadGovernor`: torch's thread count is fixed for the whole run (it
  changes float results, so a seed could not name a run otherwise); every
  ``period_s`` the governor measures how much of the CPUs other jobs keep busy
  (``/proc/stat`` minus this process's and its env workers' CPU time) and lets the
  run's threads run on only the CPUs left free (:mod:`alf.utils.cpu_affinity`),
  which leaves every result bit for bit unchanged; and it says when the run is
  CPU-starved (its threads wait for a CPU a large share of the time, per
  ``/proc/<pid>/task/*/schedstat``). docs/design/thread_budget.md says why.

Everything degrades quietly where ``/proc`` or cgroups are missing (other
systems): the run then keeps every CPU and nothing is reported.
"""
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from alf.utils import cpu_affinity

# OpenMP runtimes read these when they load; torch loads libgomp (or Intel's
# runtime) at import, so they must be in the environment before ``import torch``.
# An idle OpenMP thread spins this long for the next parallel region, then sleeps:
# libgomp's default spins 300,000 times (and OMP_WAIT_POLICY=ACTIVE forever) on a
# core another process may want; PASSIVE (no spin) made sac_pendulum.gin 1.5x
# slower alone (33 s vs 22 s). 20,000 spins (~0.5-1 ms) kept that speed, but once the
# governor narrows a run's threads onto fewer CPUs (issue 29) a waiting thread spins
# on the very CPU its partner needs, every parallel region: a 2-thread MLP update on
# 1 CPU took 80 s with 20,000 spins, 12 s with 1,000, 4 s with 1 thread.
# docs/benchmarks.md, "A busy machine". Intel's runtime: 1 ms instead of its 200 ms.
YIELDING_ENV = {"GOMP_SPINCOUNT": "1000", "KMP_BLOCKTIME": "1"}
# any of these set means the user chose how OpenMP threads wait: leave it alone
# (GOMP_SPINCOUNT: libgomp's spin count; KMP_BLOCKTIME: Intel's runtime)
WAIT_POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def prefer_yielding_thread_pools(environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Make idle OpenMP threads spin briefly, then sleep, unless the user chose a policy.

    Sets :data:`YIELDING_ENV` unless one of :data:`WAIT_POLICY_VARS` is set (a user's
    own ``OMP_WAIT_POLICY=ACTIVE`` or ``GOMP_SPINCOUNT`` wins). Child processes inherit
    it. Has no effect on a runtime already loaded (``import torch`` before ``import alf``).

    Returns:
        the variables it set (name -> value).
    """
    environ = os.environ if environ is None else environ
    applied: Dict[str, str] = {}
    if any(name in environ for name in WAIT_POLICY_VARS):
        return applied
    for name, value in YIELDING_ENV.items():
        if name not in environ:
            environ[name] = value
            applied[name] = value
    return applied


def _cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> Optional[float]:
    """CPUs allowed by a cgroup CPU quota (v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), or None."""
    try:
        with open(os.path.join(root, "cpu.max")) as f:  # cgroup v2: "max 100000" / "200000 100000"
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            quota_us = int(f.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            period_us = int(f.read())
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


# the CPUs this process was started with, while a ThreadGovernor has narrowed them (None
# otherwise): what "usable" means for the rest of the run (thread counts, env workers)
_LAUNCH_AFFINITY: Optional[List[int]] = None


def _affinity() -> Sequence[int]:
    """This process's CPUs: its affinity mask as started (a thread governor's temporary
    narrowing does not count)."""
    if _LAUNCH_AFFINITY is not None:
        return list(_LAUNCH_AFFINITY)
    return cpu_affinity.current_affinity()


def usable_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota (>= 1)."""
    count = len(_affinity())
    quota = _cgroup_cpu_quota()
    if quota is not None:
        count = min(count, max(1, math.ceil(quota - 1e-9)))
    return max(1, count)


def _omp_num_threads() -> Optional[int]:
    """``OMP_NUM_THREADS`` when the user set it to a positive count (the usual way to cap
    the threads of many runs at once), else None."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0])
    except ValueError:
        return None
    return n if n > 0 else None


def _busy_ticks(cpus: Sequence[int]) -> Optional[Dict[int, float]]:
    """Clock ticks each of the given CPUs has spent busy since boot (None: unknown)."""
    return cpu_affinity.busy_ticks_per_cpu(cpus)


def _own_wait_ns() -> Optional[Sequence[int]]:
    """(ns on a CPU, ns waiting in a run queue) summed over this process's threads."""
    run = wait = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                fields = f.read().split()
            run += int(fields[0])
            wait += int(fields[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return run, wait


def processes_cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) of the given live processes (a vanished one counts 0)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                # the command name (field 2) may hold spaces: split after its ")"
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass
class CpuSample:
    """One reading; differences of two readings give rates."""
    wall: float  # monotonic seconds
    busy_cpu_s: Optional[float]  # seconds the usable CPUs were busy (everyone), since boot
    own_cpu_s: float  # this process's CPU seconds (all its threads)
    run_wait_ns: Optional[Sequence[int]]  # this process's threads: (on CPU, waiting) ns
    children: Dict[int, float]  # this run's child processes: pid -> CPU seconds
    per_cpu_s: Optional[Dict[int, float]] = None  # CPU -> busy seconds since boot

    @classmethod
    def take(cls, cpus: Sequence[int], child_pids: Sequence[int] = ()) -> "CpuSample":
        """Read the clocks now: busy time of ``cpus``, this process's, ``child_pids``'."""
        t = os.times()
        ticks = _busy_ticks(cpus)
        per_cpu = None if ticks is None else {c: v / _CLOCK_TICKS for c, v in ticks.items()}
        return cls(time.monotonic(), None if per_cpu is None else sum(per_cpu.values()),
                   t.user + t.system, _own_wait_ns(),
                   {pid: processes_cpu_seconds([pid]) for pid in child_pids}, per_cpu)


@dataclass
class CpuLoad:
    """What happened on this process's CPUs between two samples.

    Attributes:
        others: CPUs (0..usable) kept busy by other processes, this run's own child
            processes (env workers) included.
        foreign: the part of ``others`` that is not this run's (other runs, other jobs):
            what the thread count gives way to.
        wait_share: share of its threads' runnable time this process spent waiting for
            a CPU (0..1); None where the kernel does not report it.
    """
    others: Optional[float]
    foreign: Optional[float]
    wait_share: Optional[float]


def _children_cpu_s(a: Dict[int, float], b: Dict[int, float]) -> float:
    """CPU seconds the children present in both samples used between them (a restarted
    worker has a new pid)."""
    return sum(max(0.0, b[p] - a[p]) for p in b if p in a)


def load_between(a: CpuSample, b: CpuSample, capacity: int) -> CpuLoad:
    """The :class:`CpuLoad` from sample ``a`` to the later sample ``b``; ``capacity`` is
    the number of CPUs the samples' busy time was summed over (the affinity mask)."""
    dt = b.wall - a.wall
    others = foreign = None
    if dt > 0 and a.busy_cpu_s is not None and b.busy_cpu_s is not None:
        others = (b.busy_cpu_s - a.busy_cpu_s - (b.own_cpu_s - a.own_cpu_s)) / dt
        others = min(float(capacity), max(0.0, others))
        children = _children_cpu_s(a.children, b.children) / dt
        foreign = max(0.0, others - children)
    share = None
    if a.run_wait_ns is not None and b.run_wait_ns is not None:
        ran = b.run_wait_ns[0] - a.run_wait_ns[0]
        waited = b.run_wait_ns[1] - a.run_wait_ns[1]
        if ran + waited > 0:
            share = max(0.0, waited / (ran + waited))
    return CpuLoad(others, foreign, share)


def cpus_for(load: CpuLoad, usable: int, maximum: int, current: int,
             capacity: Optional[int] = None) -> int:
    """CPUs the run's threads should run on next: those other jobs leave free, within
    [1, maximum].

    Other jobs are ``load.foreign``: this run's own env workers are not counted, since
    the config sized them next to the learner (an async SAC run whose learner gave its
    second CPU to its own busy worker was 11% slower on an idle machine).

    ``capacity``: the CPUs ``load`` was measured over (default ``usable``).
    Hysteresis: a CPU is added only when a whole further CPU (minus a quarter) is
    free, and removed when less than half of the current count's last CPU is; so a
    run does not flip between counts on noise.
    """
    if load.foreign is None:
        return current
    # a cgroup quota (``usable``) smaller than the affinity mask (``capacity``): other
    # jobs on the host's other CPUs take nothing from this run's quota
    free = min(float(usable), (capacity or usable) - load.foreign)
    target = current
    while target > 1 and free < target - 0.5:
        target -= 1
    while target < maximum and free >= target + 0.75:
        target += 1
    return max(1, min(maximum, target))


STARVED_WAIT_SHARE = 0.25  # threads waited for a CPU at least this share of the time
STARVED_OTHERS = 0.5  # and other processes kept at least half a CPU busy


_TORCH_DEFAULT_THREADS: Optional[int] = None


def _torch_default_threads(torch) -> int:
    """torch's own intra-op default (read before any governor changes it): the cap of
    ``num_threads=None``, so that a run never starts more threads than torch would."""
    global _TORCH_DEFAULT_THREADS  # pylint: disable=global-statement
    if _TORCH_DEFAULT_THREADS is None:
        _TORCH_DEFAULT_THREADS = max(1, torch.get_num_threads())
    return _TORCH_DEFAULT_THREADS


def default_thread_count() -> int:
    """torch's thread count for a run that does not set ``TrainerConfig.num_threads``:
    ``OMP_NUM_THREADS`` if set, else the CPUs this process started with
    (:func:`usable_cpus`) capped by torch's own default. A function of the machine and
    the environment, never of the load (docs/design/thread_budget.md)."""
    import torch  # pylint: disable=import-outside-toplevel
    return _omp_num_threads() or min(usable_cpus(), _torch_default_threads(torch))


class ThreadGovernor:
    """Keeps torch's thread count fixed and lets the run's threads use only the CPUs
    other jobs leave free.

    Call :meth:`tick` from the main thread often (e.g. every training iteration;
    it does work only every ``period_s``). The thread count is set once, here: torch
    splits reductions and convolution gradients into one part per thread, so the count
    changes float results and a run whose count followed the machine's load could not
    be reproduced from its seed. What follows the load is the set of CPUs every thread
    of this process may run on (:func:`alf.utils.cpu_affinity.pin_process`): which and
    how many CPUs the same threads run on changes no result. Child processes (env and
    policy workers) move with the run: narrowed and widened with it, a new one put on
    the run's CPUs (an async learner narrowed to one CPU next to its own workers
    spread over both took turns with them mid-operation: two async SAC runs side by
    side took 1.67x their time back to back, 0.88x with the workers moved along).

    Args:
        maximum: torch's thread count (``TrainerConfig.num_threads``, exactly; when
            None, ``OMP_NUM_THREADS`` if set, else :func:`usable_cpus` capped by torch's
            own default). It depends on the configuration and, by default, on the CPUs
            the run starts with, never on their load.
        adaptive: False keeps every launch CPU whatever the load (the load is still
            measured and reported).
        period_s: seconds between measurements.
        child_pids: returns the pids of this run's child processes (env workers), so
            that their CPU time is not reported as another job's.
    """

    def __init__(self, maximum: Optional[int], adaptive: bool = True, period_s: float = 1.0,
                 child_pids: Callable[[], Sequence[int]] = tuple):
        # deferred: torch is heavy, and alf/__init__.py imports this module before torch so
        # that prefer_yielding_thread_pools() can set OpenMP's variables first
        import torch  # pylint: disable=import-outside-toplevel
        self._torch = torch
        self.usable = usable_cpus()
        # an explicit count is exact (a config names its results); the default is sized
        # to the CPUs the run starts with, never to their load
        self.maximum = max(1, int(maximum)) if maximum else default_thread_count()
        self.adaptive = adaptive
        self.period_s = period_s
        self._launch = list(_affinity())  # the CPUs this run started with
        self._cpus = list(self._launch)
        self._child_pids = child_pids
        self._placed_children: set = set()
        self._moved = False  # the run's CPUs have changed at least once
        # the main thread and a learner thread both tick: one at a time; after restore()
        # a late tick (a learner thread outliving its join) does nothing
        self._lock = threading.Lock()
        self._closed = False
        self._initial = torch.get_num_threads()
        self.threads = self.maximum  # never changes during the run
        self._set(self.threads)
        # the most CPUs worth running on: one per torch thread, within the quota
        self._cpu_limit = max(1, min(self.threads, self.usable, len(self._launch)))
        self.cpus_in_use = self._cpu_limit
        self._last = self._sample()
        self.load = CpuLoad(None, None, None)  # over the last period

    def _sample(self) -> CpuSample:
        try:
            pids = list(self._child_pids())
        except Exception:  # noqa: BLE001 - a closing unroller: measure without children
            pids = []
        return CpuSample.take(self._launch, pids)

    def _set(self, n: int) -> None:
        if self._torch.get_num_threads() != n:
            self._torch.set_num_threads(n)

    @property
    def narrowed(self) -> bool:
        """The run's threads currently run on fewer CPUs than it started with."""
        return self._cpus != self._launch

    def tick(self, force: bool = False) -> bool:
        """Measure and narrow or widen the run's CPUs if ``period_s`` has passed (or
        ``force``); True if measured."""
        now = time.monotonic()
        if self._closed or (not force and now - self._last.wall < self.period_s):
            return False
        if not self._lock.acquire(blocking=False):
            return False  # the other thread is measuring right now
        try:
            return self._tick_locked()
        finally:
            self._lock.release()

    def _tick_locked(self) -> bool:
        if self._closed:
            return False
        sample = self._sample()
        if sample.wall - self._last.wall <= 0:
            return False
        previous, self._last = self._last, sample
        self.load = load_between(previous, sample, len(self._launch))
        if self.adaptive:
            self.cpus_in_use = cpus_for(self.load, self.usable, self._cpu_limit,
                                        self.cpus_in_use, capacity=len(self._launch))
            self._place(previous, sample)
        self._place_new_children(sample.children)
        return True

    def _place(self, previous: CpuSample, sample: CpuSample) -> None:
        """Run on the ``cpus_in_use`` launch CPUs that others kept least busy (all of
        them when none is to be given back)."""
        global _LAUNCH_AFFINITY  # pylint: disable=global-statement
        if self.cpus_in_use >= self._cpu_limit:
            wanted = list(self._launch)
        elif previous.per_cpu_s is None or sample.per_cpu_s is None:
            return  # nothing to choose by: keep the CPUs
        else:
            dt = sample.wall - previous.wall
            busy = {c: (sample.per_cpu_s.get(c, 0.0) - previous.per_cpu_s.get(c, 0.0)) / dt
                    for c in self._launch}
            # this process and its children: they run on the run's CPUs
            own = (sample.own_cpu_s - previous.own_cpu_s
                   + _children_cpu_s(previous.children, sample.children)) / dt
            wanted = cpu_affinity.least_busy(self._launch, self.cpus_in_use, busy, own,
                                             self._cpus)
        if wanted == self._cpus:
            return
        if cpu_affinity.pin_process(wanted):
            self._cpus = wanted
            self._moved = True
            _LAUNCH_AFFINITY = None if wanted == self._launch else list(self._launch)
            for pid in sample.children:
                cpu_affinity.pin_process(wanted, pid)
                self._placed_children.add(pid)

    def _place_new_children(self, children: Dict[int, float]) -> None:
        """A child first seen now (a worker started or restarted) runs on the run's
        current CPUs: it inherited the mask of the thread that started it, which may be
        from before the run last moved."""
        for pid in children:
            if pid not in self._placed_children:
                if self._moved:  # else its mask is the launch one, the run's own
                    cpu_affinity.pin_process(self._cpus, pid)
                self._placed_children.add(pid)

    def restore(self) -> None:
        """Give torch back the thread count it had before this governor, and this
        process its launch CPUs (a notebook or a test that trains twice must not
        inherit a narrowed run)."""
        global _LAUNCH_AFFINITY  # pylint: disable=global-statement
        with self._lock:
            self._closed = True
            self._set(self._initial)
            if self.narrowed and cpu_affinity.pin_process(self._launch):
                self._cpus = list(self._launch)
                _LAUNCH_AFFINITY = None

    @property
    def starved(self) -> bool:
        """Over the last period, other jobs held the CPUs this run was waiting for."""
        load = self.load
        if load.foreign is None or load.foreign < STARVED_OTHERS:
            return False
        return load.wait_share is None or load.wait_share >= STARVED_WAIT_SHARE

    def progress_note(self) -> str:
        """`` | CPU-starved: ...`` for the progress line when :attr:`starved`, else ``""``."""
        if not self.starved:
            return ""
        load = self.load
        waited = (f", waited for a CPU {load.wait_share:.0%} of the time"
                  if load.wait_share is not None else "")
        return (f" | CPU-starved: other processes busy on {load.foreign:.1f} of "
                f"{self.usable} CPUs{waited}; running on {self.cpus_in_use} of them, "
                f"{self.threads} torch thread{'s' if self.threads != 1 else ''}")
