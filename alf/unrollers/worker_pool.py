"""The worker processes of an async run: start, watch, restart and stop them.

:class:`WorkerPool` owns one handle per worker process (process, pipe,
incarnation): env workers (:class:`WorkerHandle`) or policy workers (the same
pool with another entry point). It starts workers with ``spawn`` (SIGINT ignored, non-daemonic so
that they may start env subprocesses), waits for their ``ready``, gathers their
messages from all pipes at once, and on a fault (an error report, an exit code,
or a heartbeat older than ``timeout_s``) names the worker, restarts it with fresh
envs and counts it; past ``max_restarts`` it raises :class:`RunFailedError`.
Stopping asks each worker to stop, then terminates and kills (never waits forever).
"""
import sys
import time
from multiprocessing.connection import wait as wait_connections
from multiprocessing.connection import Connection
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.multiprocessing as torch_mp

from alf.errors import RunFailedError
from alf.unrollers.env_worker import WorkerSpec, worker_main
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.utils.cpu_budget import processes_cpu_seconds
from alf.utils.process_signals import sigint_ignored_in_children

#: a worker still starting when ``env_worker_timeout_s`` runs out, but busy on a CPU in
#: that time (at least ``STARTUP_PROGRESS_CPU_S``: importing torch, building its envs on
#: a busy machine), gets another ``env_worker_timeout_s``, at most this many times
STARTUP_EXTENSIONS = 10
STARTUP_PROGRESS_CPU_S = 0.05


class FatalWorkerError(RunFailedError):
    """A worker's ``("fatal", text)`` report: never answered by a restart."""


def raise_if_fatal(msg: Any) -> None:
    """A worker's ``("fatal", text)`` report (an error no restart can fix, e.g. a NaN
    observation of its env) stops the run: :class:`FatalWorkerError` with ``text``, also
    when a restarted worker reports it before it is ready."""
    if msg is not None and msg[0] == "fatal":
        raise FatalWorkerError(msg[1])


class WorkerHandle:
    """Learner-side record of one env worker (its process, pipe and restarts)."""

    def __init__(self, worker_id: int, offsets: List[int], slots: List[TrajectorySlots]):
        self.worker_id = worker_id
        self.offsets = offsets
        self.slots = slots
        self.process: Any = None
        self.conn: Any = None
        self.incarnation = -1
        self.next_seq = 0  # deterministic: the next sequence number expected per group
        self.ready = False
        self.inboxes: Optional[List[Any]] = None  # per group ActInbox, with policy workers

    @property
    def process_name(self) -> str:
        return f"alf-env-worker-{self.worker_id}"

    def describe(self, envs_per_group: int) -> str:
        first, last = self.offsets[0], self.offsets[-1] + envs_per_group - 1
        pid = f", pid {self.process.pid}" if self.process is not None else ""
        return f"env worker {self.worker_id} (envs {first}-{last}{pid})"


class WorkerPool:
    """Env worker processes (see the module docstring).

    Args:
        handles: one per worker (slots and env-id offsets already set).
        make_spec: ``fn(handle) -> WorkerSpec`` for its next incarnation.
        heartbeat: shared float64 ``[num_workers]``: time of each worker's last step.
        envs_per_group: for the names in messages ("envs 0-3").
        timeout_s: start-up limit, and the silence after which a worker counts as hung.
        max_restarts: restarts (all workers together) before giving up.
        on_restart: ``fn(handle)`` called before a worker is relaunched (drop what its
            previous incarnation reported but was not used).
        target: the process entry point, ``fn(spec, learner_conn, *extra_args)``.
        extra_args: ``fn(handle) -> tuple`` of further arguments for the next launch
            (e.g. pipes to other workers); the learner's copies of any
            :class:`Connection` in it are closed once the process has started.
        restart_note: what a restart does, for the warning line.
        give_up_hint: what to do, for the error past ``max_restarts``.
    """

    def __init__(self, handles: Sequence[Any], make_spec: Callable[[Any], Any],
                 heartbeat: torch.Tensor, envs_per_group: int, timeout_s: float,
                 max_restarts: int, on_restart: Callable[[Any], None] = lambda w: None,
                 target: Callable[..., None] = worker_main,
                 extra_args: Callable[[Any], tuple] = lambda w: (),
                 restart_note: str = "restarting it with fresh envs (its partial trajectory "
                                     "is discarded",
                 give_up_hint: str = "Fix the env, or raise the limit"):
        self.workers = list(handles)
        self._target = target
        self._extra_args = extra_args
        self._restart_note = restart_note
        self._give_up_hint = give_up_hint
        self._make_spec = make_spec
        self._heartbeat = heartbeat
        self._per_group = envs_per_group
        self._timeout_s = float(timeout_s)
        self._max_restarts = int(max_restarts)
        self._on_restart = on_restart
        self.restarts = 0
        self.last_ready_at = time.monotonic()  # when the newest (re)started worker was ready

    def start(self) -> None:
        """Launch every worker and wait until all are ready."""
        for w in self.workers:
            self._launch(w)
        self._wait_ready()

    def send(self, w: WorkerHandle, msg: Any) -> None:
        """Send ``msg`` to a worker; a dead worker's pipe is ignored (the health check
        restarts it)."""
        try:
            w.conn.send(msg)
        except (OSError, ValueError):
            pass

    def messages(self, timeout: float) -> List[Tuple[WorkerHandle, Any]]:
        """Every message waiting on any worker's pipe (waits up to ``timeout`` for one)."""
        conns = {w.conn: w for w in self.workers if w.conn is not None}
        out = []
        for conn in wait_connections(list(conns), timeout):
            w = conns[conn]
            while True:
                msg = self._recv(w)
                if msg is None:
                    break  # pipe closed: check_health names and restarts the worker
                out.append((w, msg))
                if not w.conn.poll():
                    break
        return out

    def request_stop(self) -> None:
        """Ask every worker to stop (without waiting: :meth:`close` waits)."""
        for w in self.workers:
            if w.process is not None:
                self.send(w, ("stop",))

    def close(self, timeout: float = 5.0) -> None:
        """Ask every worker to stop, wait for all of them together at most ``timeout``
        seconds, then terminate and kill the rest (a few seconds in all, however many
        workers hang)."""
        running = [w for w in self.workers if w.process is not None]
        for w in running:
            self.send(w, ("stop",))
        deadline = time.monotonic() + timeout
        for w in running:
            w.process.join(max(0.0, deadline - time.monotonic()))
        for w in running:
            if w.process.exitcode is None:
                w.process.terminate()
        deadline = time.monotonic() + 1.0
        for w in running:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.exitcode is None:
                w.process.kill()
                w.process.join(1.0)
            try:
                w.conn.close()
            except OSError:
                pass
            w.process = None

    def _launch(self, w: WorkerHandle) -> None:
        ctx = torch_mp.get_context("spawn")
        w.incarnation += 1
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        extra = tuple(self._extra_args(w))
        process = ctx.Process(target=self._target, args=(self._make_spec(w), child_conn) + extra,
                              name=w.process_name, daemon=False)
        with sigint_ignored_in_children():
            process.start()
        child_conn.close()
        for arg in extra:  # the child has its own copies now
            for conn in (arg.values() if isinstance(arg, dict) else [arg]):
                if isinstance(conn, Connection):
                    conn.close()
        w.process, w.conn, w.ready = process, parent_conn, False
        self._heartbeat[w.worker_id] = time.time()

    def _wait_ready(self) -> None:
        """Wait until every worker reported ready. After ``env_worker_timeout_s`` the late
        ones are named, unless they used the CPU meanwhile (a start-up slowed down by a
        busy machine, not a hang): then they get another period, up to
        :data:`STARTUP_EXTENSIONS` times."""
        deadline = time.time() + self._timeout_s
        extensions = 0
        cpu_seen = {id(w): processes_cpu_seconds([w.process.pid]) for w in self.workers}
        while not all(w.ready for w in self.workers):
            for w in self.workers:
                if w.ready:
                    continue
                if w.conn.poll(0.05):
                    msg = self._recv(w)
                    raise_if_fatal(msg)
                    if msg is None or msg[0] == "error":
                        reason = msg[1] if msg else f"exited with status {w.process.exitcode}"
                        raise RunFailedError(f"{w.describe(self._per_group)} failed to start: "
                                             f"{reason}")
                    if msg[0] == "ready":
                        w.ready = True
                        self._heartbeat[w.worker_id] = time.time()  # alive from now on
                        self.last_ready_at = time.monotonic()
                elif w.process.exitcode is not None:
                    raise RunFailedError(f"{w.describe(self._per_group)} failed to start: it "
                                         f"exited with status {w.process.exitcode}")
            if time.time() > deadline:
                late = [w for w in self.workers if not w.ready]
                cpu_now = {id(w): processes_cpu_seconds([w.process.pid]) for w in late}
                busy = all(cpu_now[id(w)] - cpu_seen[id(w)] >= STARTUP_PROGRESS_CPU_S
                           for w in late)
                if busy and extensions < STARTUP_EXTENSIONS:
                    extensions += 1
                    cpu_seen.update(cpu_now)
                    deadline = time.time() + self._timeout_s
                    continue
                reason = (f"still busy after {extensions} extensions" if busy else
                          "not using the CPU: hung, not merely slow")
                raise RunFailedError(
                    f"{', '.join(w.describe(self._per_group) for w in late)} did not start "
                    f"within {self._timeout_s * (extensions + 1):g} s "
                    f"(TrainerConfig.env_worker_timeout_s = {self._timeout_s:g}; {reason})")

    def _last_error(self, w: Any) -> Optional[str]:
        """The text of an ``error`` report still unread on an exited worker's pipe (a
        ``fatal`` one raises)."""
        try:
            while w.conn.poll():
                msg = w.conn.recv()
                raise_if_fatal(msg)
                if msg[0] == "error":
                    return msg[1]
        except (EOFError, OSError):
            pass
        return None

    def _recv(self, w: WorkerHandle) -> Optional[Any]:
        try:
            return w.conn.recv()
        except (EOFError, OSError):
            return None

    def _stop_process(self, w: WorkerHandle, timeout: float = 5.0) -> None:
        process = w.process
        if process is None:
            return
        if process.exitcode is None:
            try:
                w.conn.send(("stop",))
            except (OSError, ValueError):
                pass
            process.join(timeout)
        if process.exitcode is None:
            process.terminate()
            process.join(1.0)
        if process.exitcode is None:
            process.kill()
            process.join(1.0)
        try:
            w.conn.close()
        except OSError:
            pass
        w.process = None

    def restart(self, w: WorkerHandle, reason: str) -> None:
        """Replace a failed worker by a fresh one (new envs, new seed)."""
        name = w.describe(self._per_group)
        self.restarts += 1
        limit = self._max_restarts
        self._stop_process(w, timeout=1.0)
        if self.restarts > limit:
            raise RunFailedError(
                f"{name} {reason}; that is restart {self.restarts} of at most {limit} "
                f"(TrainerConfig.max_env_worker_restarts): giving up. {self._give_up_hint}")
        print(f"[alf] warning: {name} {reason}; {self._restart_note}; restart "
              f"{self.restarts}/{limit})",
              file=sys.stderr, flush=True)
        self._on_restart(w)
        self._launch(w)
        try:
            self._wait_ready()
        except FatalWorkerError:
            raise
        except RunFailedError as e:  # the relaunch failed too: one more restart, if any left
            self._stop_process(w, timeout=1.0)
            self.restart(w, f"failed to restart ({str(e).split(': ', 1)[-1]})")

    def check_health(self) -> None:
        now = time.time()
        timeout = self._timeout_s
        for w in self.workers:
            if w.process.exitcode is not None:
                code = w.process.exitcode
                how = (f"was killed by signal {-code}" if code < 0
                       else f"exited with status {code}")
                last = self._last_error(w)  # its own report, if it made one before exiting
                self.restart(w, f"raised {last}" if last else how)
            elif now - float(self._heartbeat[w.worker_id]) > timeout:
                self.restart(w, f"has not reported for {now - float(self._heartbeat[w.worker_id]):.0f} s "
                                 f"(TrainerConfig.env_worker_timeout_s={timeout:g}): hung")

