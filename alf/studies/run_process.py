"""One trial's ``alf.bin.train`` process, pinned to its share of this machine's CPUs.

Why pin: K runs side by side that each size their thread pools for the whole machine
thrash (measured: ``sac_pendulum.gin`` ~5x slower with the 2 cores 3x oversubscribed).
A run pinned to ``n`` CPUs (``sched_setaffinity``, inherited by its env workers) sees
``n`` usable CPUs (:func:`alf.utils.cpu_budget.usable_cpus`) and sizes its env workers
and its thread governor for them, so K trials share the machine the way K runs back to
back would use it; its torch thread count is the one a run alone would take
(:func:`trial_environ`), since float results depend on it.

The process is in its own session (a terminal's Ctrl-C reaches the sweep, which stops
each run once, at an iteration boundary, with a checkpoint) and gets SIGTERM if the
sweep dies without stopping it (``PR_SET_PDEATHSIG``): it checkpoints and exits rather
than train on as an orphan.
"""
import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

from alf.utils.cpu_budget import default_thread_count, usable_cpus

PR_SET_PDEATHSIG = 1
# exit statuses of a run this process asked to stop: alf's own (130 Ctrl-C, 143 SIGTERM,
# each after a checkpoint), or the signal itself when it arrived before alf installed its
# handlers (still importing), or a kill after a stop timed out
STOPPED_STATUSES = (130, 143, -signal.SIGINT, -signal.SIGTERM, -signal.SIGKILL)
STOP_TIMEOUT_S = 120.0  # a run stops at its next iteration boundary, then saves


def cpu_slots(parallel: int) -> List[List[int]]:
    """``parallel`` CPU sets for as many runs at once: this process's usable CPUs split
    into contiguous, near-equal, disjoint groups; with fewer CPUs than runs, runs share
    CPUs round-robin (one each).

    Returns:
        ``parallel`` lists of CPU ids.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    cpus = cpus[:usable_cpus()]  # a cgroup quota below the affinity mask
    if parallel >= len(cpus):
        return [[cpus[i % len(cpus)]] for i in range(parallel)]
    base, extra = divmod(len(cpus), parallel)
    slots, start = [], 0
    for i in range(parallel):
        size = base + (1 if i < extra else 0)
        slots.append(cpus[start:start + size])
        start += size
    return slots


def _child_setup(cpus: Sequence[int]):
    """What the child runs before exec: pin, die with the parent, own session."""
    def setup() -> None:
        os.setsid()
        if cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the sweep's own cleanup stops it
            pass
    return setup


def trial_environ() -> Dict[str, str]:
    """The environment of a trial's process: this one's, with ``OMP_NUM_THREADS`` set to
    the torch thread count a run started alone here would take by default (unless the
    user set it). A trial pinned to a slot of fewer CPUs then still splits every
    reduction as that run does: its results do not depend on ``--parallel``
    (docs/design/thread_budget.md). A config's own ``TrainerConfig.num_threads`` wins."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(default_thread_count()))
    return env


class RunProcess:
    """A running ``python -m alf.bin.train`` of one trial.

    Args:
        conf: the gin file (path or bundled example name).
        run_dir: its ``--root_dir`` (a run there with checkpoints is resumed).
        conf_params: ``--conf_param`` bindings (study-wide ones, then the trial's).
        cpus: the CPU ids it is pinned to (empty: not pinned).
        log_path: where its stdout and stderr go (appended: a resume adds to it).
        tag: names the command that started it (``sweep``, ``pbt``) in the log's line
            ``[<tag>] <command line>`` before each start.
    """

    def __init__(self, conf: str, run_dir: str, conf_params: Sequence[str],
                 cpus: Sequence[int], log_path: str, tag: str = "sweep"):
        os.makedirs(run_dir, exist_ok=True)
        cmd = [sys.executable, "-m", "alf.bin.train", f"--conf={conf}", f"--root_dir={run_dir}"]
        for binding in conf_params:
            cmd += ["--conf_param", binding]
        self.command = cmd
        self.run_dir = run_dir
        self.cpus = list(cpus)
        self.log_path = log_path
        self._header = f"[{tag}] "
        with open(log_path, "ab") as log:
            log.write(f"{self._header}{' '.join(cmd)} (CPUs {self.cpus})\n".encode())
            log.flush()
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=trial_environ(),
                                          preexec_fn=_child_setup(self.cpus))
        self.pid = self._proc.pid
        self._stop_sent: Optional[float] = None

    @property
    def stop_requested(self) -> bool:
        """Whether this process asked it to stop (a later exit by a signal is a stop, not
        a failure; a signal from elsewhere, e.g. the OOM killer, is a failure)."""
        return self._stop_sent is not None

    def poll(self) -> Optional[int]:
        """Its exit status, or None while it runs."""
        return self._proc.poll()

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        """Ask it to stop at its next iteration boundary, saving a checkpoint (once)."""
        if self._stop_sent is None and self._proc.poll() is None:
            self._stop_sent = time.monotonic()
            try:
                os.kill(self._proc.pid, signum)
            except ProcessLookupError:
                pass

    def wait_stopped(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Wait for it to exit after :meth:`request_stop`; a run that does not exit within
        ``timeout_s`` is killed, with its process group (env workers)."""
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self._proc.wait()

    def kill(self) -> None:
        """SIGKILL its whole process group (the run and anything it started)."""
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def log_tail(self, lines: int = 3) -> str:
        """The last ``lines`` lines the run printed (the error a failed run printed; not
        the command lines this class writes before each start)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 4096))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        printed = [l.strip() for l in text.strip().splitlines()
                   if l.strip() and not l.startswith(self._header)]
        return " | ".join(printed[-lines:]) or "it printed nothing"
