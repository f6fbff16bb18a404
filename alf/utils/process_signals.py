"""Process-level signal helpers that every layer may use: which signals stop a command,
starting child processes with Ctrl-C ignored, ignoring and restoring handlers.

What a stop *means* (checkpoint at the iteration boundary, exit status, messages) is the
trainer's business (:mod:`alf.trainers.interrupt_guard`); this module only moves signal
dispositions around, so the unrollers and env code that start processes need nothing
from the trainers.
"""
import contextlib
import signal
import threading
from typing import Any, Dict, Iterator

#: the signals that stop a command cleanly (checkpoint, reap, exit ``128 + signum``)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def default_handler(signum: int) -> Any:
    """Python's own handler for ``signum``: KeyboardInterrupt for SIGINT, else SIG_DFL (what a
    handler saved as None, i.e. not installed from Python, is restored to)."""
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


def restore_handlers(previous: Dict[int, Any]) -> None:
    """Reinstall the handlers ``signal.signal`` returned (``{signum: handler}``)."""
    for signum, handler in previous.items():
        signal.signal(signum, handler if handler is not None else default_handler(signum))


def ignore_stop_signals() -> Dict[int, Any]:
    """Ignore SIGINT and SIGTERM in this process (a worker's first statement: its parent
    decides how to stop; or a command already stopping). Returns the previous handlers
    for :func:`restore_handlers`; main thread only (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS}


@contextlib.contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM inside this block (e.g. while a file is finished that a
    stop would leave unreadable); the previous handlers are restored on exit."""
    previous = ignore_stop_signals()
    try:
        yield
    finally:
        restore_handlers(previous)


@contextlib.contextmanager
def sigint_ignored_in_children() -> Iterator[None]:
    """Env worker processes started in this block inherit SIGINT ignored (kept across
    fork and exec), so a terminal Ctrl-C, which reaches the whole process group, does not
    kill them mid-step: the trainer finishes the iteration, saves, then closes them.
    SIGTERM is not ignored here: this process would lose a ``docker stop`` or Slurm
    SIGTERM arriving while envs are built; the children ignore it themselves as their
    first statement (``env_worker.worker_main``, ``async_worker.async_worker``). Main
    thread only; the previous handler is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        restore_handlers({signal.SIGINT: previous})
