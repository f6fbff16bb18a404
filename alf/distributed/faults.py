"""Naming the rank that failed, and stopping this one promptly when it does.

A data-parallel rank blocks in collectives that need every other rank, so a
rank that dies must not leave the others waiting forever. Three paths end a
rank, each with one line that names the culprit:

- a collective fails (gloo/NCCL see the dead peer's connection close):
  :meth:`PeerTable.describe_failure` names the local peers whose process is gone;
- the launcher (torchrun's agent) sends SIGTERM after a worker died:
  :class:`StopHandler` raises :class:`PeerLostError` in the main thread;
- the launcher itself dies (its workers run in their own session, so nothing
  else would stop them): :func:`start_parent_watch` notes why (the ranks then say
  "stopped because the launcher (pid N) exited", not that someone pressed Ctrl-C)
  and sends this process SIGTERM, and exits hard if the main thread is stuck in C++
  for ``grace_s`` more.
"""
import os
import re
import signal
import socket
import sys
import threading
import time
from typing import Callable, List, NamedTuple, Optional

from alf.errors import RunFailedError
from alf.utils.parent_watchdog import process_exited, start_parent_watchdog


class PeerLostError(RunFailedError):
    """Another rank of the data-parallel run died or stopped responding (exit status 1)."""


class PeerInfo(NamedTuple):
    """Where one rank runs (exchanged once, when the group starts)."""
    rank: int
    host: str  # the hostname, for messages
    pid: int
    local_rank: int
    machine: str  # hostname + boot id + pid namespace: equal = pids and /dev/shm are shared


def machine_identity() -> str:
    """What makes two processes "on the same host" for pid checks and shared memory:
    the hostname alone is not enough (containers with the host's network share it)."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
    except OSError:
        pass
    try:
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    except OSError:
        pass
    return "/".join(parts)


def this_peer(rank: int, local_rank: int) -> PeerInfo:
    return PeerInfo(rank, socket.gethostname(), os.getpid(), local_rank, machine_identity())


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    return not process_exited(pid)


class PeerTable:
    """Every rank's host and pid, to name the one that is gone.

    Args:
        peers: one :class:`PeerInfo` per rank, in rank order.
        rank: this process's rank.
    """

    def __init__(self, peers: List[PeerInfo], rank: int):
        self.peers = list(peers)
        self.rank = rank
        self.host = peers[rank].host
        self.machine = peers[rank].machine

    def dead_local_peers(self) -> List[PeerInfo]:
        """Ranks on this host whose process has exited."""
        return [p for p in self.peers if p.rank != self.rank and p.machine == self.machine
                and not pid_alive(p.pid)]

    def reports(self) -> bool:
        """Whether this rank prints a peer failure: the lowest-numbered live rank on its
        host (so a failure is one line per host, not one per surviving rank)."""
        alive = [p.rank for p in self.peers if p.machine == self.machine
                 and (p.rank == self.rank or pid_alive(p.pid))]
        return min(alive) == self.rank

    def lost(self, message: str) -> "PeerLostError":
        """A :class:`PeerLostError`, silenced (``alf_silent``) unless this rank reports."""
        error = PeerLostError(message)
        error.alf_silent = not self.reports()
        return error

    def describe(self, peer: PeerInfo) -> str:
        where = "" if peer.machine == self.machine else f" on {peer.host}"
        return f"rank {peer.rank} (pid {peer.pid}{where})"

    def describe_failure(self, error: Optional[BaseException] = None, wait_s: float = 2.0,
                         timeout_s: Optional[float] = None) -> str:
        """One sentence naming the rank(s) that are gone, or, when the collective timed
        out (after ``timeout_s``) with none gone, the one(s) that are stuck; ``error`` is
        the collective's failure, if any. Waits up to ``wait_s`` for a dying local peer to
        be reaped."""
        deadline = time.monotonic() + wait_s
        dead = self.dead_local_peers()
        while not dead and time.monotonic() < deadline:
            time.sleep(0.1)
            dead = self.dead_local_peers()
        if dead:
            names = ", ".join(self.describe(p) for p in dead)
            verb = "has" if len(dead) == 1 else "have"
            return f"{names} {verb} exited"
        if timed_out(error):
            return self._stuck(error, timeout_s)
        remote = self._remote_peers_named_in(error)
        if remote:
            return ("lost the connection to " + ", ".join(self.describe(p) for p in remote) +
                    " (that rank exited or its host is unreachable)")
        detail = f" ({_first_line(error)})" if error is not None else ""
        return f"another rank stopped{detail}"

    def _stuck(self, error: BaseException, timeout_s: Optional[float]) -> str:
        """A timed-out collective with no rank gone: the rank(s) that did not join (the
        shared-memory all-reduce knows which; otherwise every other rank is a suspect)."""
        late = set(getattr(error, "ranks", ()) or ())
        suspects = [p for p in self.peers if p.rank != self.rank and (not late or p.rank in late)]
        names = ", ".join(self.describe(p) for p in suspects)
        within = f" within {timeout_s:.0f} s" if timeout_s is not None else ""
        if late or len(suspects) == 1:
            verb = "was" if len(suspects) == 1 else "were"
            stopped = self._stop_local(suspects)
            return (f"{names} {verb} still running but did not join{within}: stuck (hung, or "
                    f"starved of CPU), not exited{stopped}")
        return (f"the other ranks did not all join{within} and none has exited: one of "
                f"{names} is stuck (hung, or starved of CPU)")

    def _stop_local(self, stuck: List[PeerInfo], grace_s: float = 3.0) -> str:
        """Stop the stuck ranks on this host: SIGTERM, then SIGKILL after ``grace_s``. The
        run ends anyway (no checkpoint without every rank), and the launcher would wait
        its own grace (torchrun: 30 s) for a process that cannot answer SIGTERM (hung in
        C++, or stopped). Returns ``"; stopped it"`` (or ``them``) if any was stopped."""
        local = [p for p in stuck if p.machine == self.machine and pid_alive(p.pid)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in local:
                try:
                    os.kill(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + grace_s
            while sig == signal.SIGTERM and time.monotonic() < deadline and \
                    any(pid_alive(p.pid) for p in local):
                time.sleep(0.1)
            if not any(pid_alive(p.pid) for p in local):
                break
        if not local:
            return ""
        return "; stopped it" if len(local) == 1 else "; stopped them"

    def _remote_peers_named_in(self, error: Optional[BaseException]) -> List[PeerInfo]:
        if error is None:
            return []
        text = str(error)
        hosts = set(re.findall(r"\[([^\]]+)\]:\d+", text))
        found = []
        for p in self.peers:
            if p.rank == self.rank or p.machine == self.machine:
                continue
            try:
                addresses = {p.host, socket.gethostbyname(p.host)}
            except OSError:
                addresses = {p.host}
            if addresses & hosts:
                found.append(p)
        return found


def timed_out(error: Optional[BaseException]) -> bool:
    """Whether a collective failed by waiting too long (the shared-memory reducer's
    :class:`TimeoutError`, or gloo's "Timed out waiting ...ms")."""
    return isinstance(error, TimeoutError) or (
        error is not None and "timed out" in str(error).lower())


def _first_line(error: BaseException) -> str:
    lines = [l.strip() for l in str(error).splitlines() if l.strip()]
    return lines[0][:200] if lines else type(error).__name__


class StopHandler:
    """SIGTERM in a rank. torchrun's agent sends it to every worker when one failed, or
    when it is itself asked to stop (a second Ctrl-C, ``kill``):

    - a rank on this host is gone: raise :class:`PeerLostError` naming it, once (the
      trainer closes its envs and exits with status 1 without saving: a checkpoint
      needs every rank);
    - otherwise, while training (``on_stop_request`` set): count it as a Ctrl-C, so the
      ranks still agree on a boundary and save a checkpoint (a save in progress is
      never cut short); if a remote rank is gone, the next collective says so;
    - otherwise (building, before the loop): raise :class:`PeerLostError`.

    After the first raise (or :meth:`disarm`, when a failed collective already started
    the cleanup) further SIGTERMs are ignored, so they cannot cut the cleanup short.

    Attributes:
        on_stop_request: called with ``(signum, cause)`` while training.
        cause: why the SIGTERM came when no person sent it (set by the launcher watch:
            "the launcher (pid N) exited"); None for a plain SIGTERM.
    """

    def __init__(self, table: PeerTable):
        self._table = table
        self.disarmed = False
        self.on_stop_request: Optional[Callable[[int, Optional[str]], None]] = None
        self.cause: Optional[str] = None
        self._previous = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

    def uninstall(self) -> None:
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def disarm(self) -> None:
        self.disarmed = True

    def ignore_from_now_on(self) -> None:
        """SIGTERM ignored at the OS level until the process exits (it is leaving)."""
        self.disarmed = True
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self._previous = None

    def _on_sigterm(self, signum, frame) -> None:  # noqa: ARG002 - signal API
        if self.disarmed:
            return
        dead = self._table.dead_local_peers()
        if dead:
            self.disarmed = True
            names = ", ".join(self._table.describe(p) for p in dead)
            raise self._table.lost(f"{names} exited, so rank {self._table.rank} stops too (no "
                                   "checkpoint: it needs every rank; rerun to resume from the "
                                   "newest one)")
        if self.on_stop_request is not None:
            self.on_stop_request(signal.SIGTERM, self.cause)
            return
        self.disarmed = True
        if self.cause:
            raise self._table.lost(f"rank {self._table.rank} stopped before training started "
                                   f"because {self.cause}")
        raise self._table.lost(f"rank {self._table.rank} was stopped by SIGTERM before training "
                               "started (torchrun stops every rank when one fails or when it "
                               "is asked to stop)")


def start_parent_watch(handler: Optional[StopHandler] = None, grace_s: float = 30.0,
                       period_s: float = 0.25) -> threading.Thread:
    """A daemon thread (:func:`alf.utils.parent_watchdog.start_parent_watchdog`, every
    ``period_s``) that stops this rank when its launcher (the parent process) dies:
    SIGTERM to itself (handled by :class:`StopHandler`, told the cause first, so the
    rank says that the launcher exited, once, from rank 0), then ``os._exit(1)`` after
    ``grace_s`` if the main thread is stuck in a collective. Children of this rank (env
    workers) watch their own parent and exit in turn."""
    parent = os.getppid()

    def on_launcher_exit() -> None:
        cause = f"the launcher (pid {parent}) exited"
        if handler is not None:
            handler.cause = cause
        else:
            print(f"[alf] rank pid {os.getpid()}: {cause}; stopping", file=sys.stderr,
                  flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os._exit(1)

    return start_parent_watchdog(on_launcher_exit, parent_pid=parent, period_s=period_s,
                                 name="alf-parent-watch")
