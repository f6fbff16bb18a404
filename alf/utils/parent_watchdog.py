"""One daemon thread that notices when this process's parent has died, and reacts.

A child process must not outlive the process it works for: an env worker whose
learner was SIGKILLed, a gymnasium env worker whose trainer died, a
data-parallel rank whose launcher died. Pipes and collectives do not always
notice (a worker busy in a long ``env.step``, a pipe end also held open by
another orphan, a rank blocked in C++), so each of them starts a watchdog:
:func:`start_parent_watchdog`.

What it watches, every ``period_s`` seconds (``time.sleep``, so at most one
period late):

- whether this process was re-parented: ``os.getppid()`` is no longer
  ``parent_pid`` (the parent died and the process was adopted by init or a
  subreaper);
- optionally, whether another process (``also_watch``, e.g. the process that
  created an env when a ``forkserver`` started the worker) has exited: gone,
  or a zombie (exited, not yet reaped; some container inits never reap).

What it does once either holds: calls ``on_parent_exit()`` once, in the
watchdog thread, and the thread ends. The default, :func:`exit_quietly`,
ends the process at once (``os._exit(0)``: no cleanup handlers, nothing on
stderr); a caller with its own shutdown (a data-parallel rank that wants to
say why it stops) passes its own.
"""
import os
import threading
import time
from typing import Callable, Optional

#: how often the env workers' watchdogs look (seconds)
DEFAULT_PERIOD_S = 0.5


def process_exited(pid: int) -> bool:
    """Whether process ``pid`` has exited: no such process, or a zombie / dead entry
    (``/proc`` state ``Z`` or ``X``). Without ``/proc`` only the first test is made."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists (the pid was reused by another user's process)
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):  # no /proc: the signal test above is all we have
        return False


def exit_quietly() -> None:
    """End this process now, status 0, without cleanup (the parent that would read the
    output or the status is gone)."""
    os._exit(0)


def start_parent_watchdog(on_parent_exit: Callable[[], None] = exit_quietly, *,
                          parent_pid: Optional[int] = None, also_watch: Optional[int] = None,
                          period_s: float = DEFAULT_PERIOD_S,
                          name: str = "alf-parent-watchdog") -> threading.Thread:
    """Start the daemon thread described in the module docstring and return it.

    Args:
        on_parent_exit: called once, in the watchdog thread, when the parent is gone.
        parent_pid: the parent to watch (default: this process's parent now). Give it
            when the parent may already have died before this call (a worker told its
            learner's pid).
        also_watch: a pid whose exit counts as the parent's (None: only the parent).
        period_s: seconds between checks.
        name: the thread's name (shown by debuggers and ``py-spy``).
    """
    parent = os.getppid() if parent_pid is None else parent_pid

    def watch() -> None:
        while True:
            time.sleep(period_s)
            if os.getppid() != parent or (also_watch is not None and process_exited(also_watch)):
                on_parent_exit()
                return

    thread = threading.Thread(target=watch, name=name, daemon=True)
    thread.start()
    return thread
