"""The ``"async"`` backend's env worker: gymnasium's worker, silent when its parent dies.

gymnasium's ``AsyncVectorEnv`` worker treats a dead parent like any env error:
the ``EOFError`` of its command pipe is caught, reported to the (dead) parent,
and the report itself fails with ``BrokenPipeError``, so each worker of a
killed trainer prints two tracebacks.

:func:`async_worker` (``AsyncVectorEnv(worker=make_async_worker())``) runs
gymnasium's own worker loop with two changes:

- its command pipe is wrapped so that end-of-file and broken-pipe errors
  (the parent closed its end, usually by dying) become :class:`ParentGone`, a
  ``BaseException`` that gymnasium's ``except Exception`` does not swallow:
  the env is still closed by gymnasium's ``finally``, then the worker returns
  quietly (exit status 0, nothing on stderr);
- a daemon thread (:func:`alf.utils.parent_watchdog.start_parent_watchdog`) watches
  the process that created the env and this worker's parent, and ends the worker
  (``os._exit(0)``) within :data:`WATCHDOG_PERIOD_S` once either is gone, for
  the cases the pipe cannot see: a worker busy in a long ``env.step``, the
  pipe's parent end also held open by another orphan (a process forked later
  inherits it), or a ``forkserver`` fork server that waits for its workers.

``Ctrl-C`` is unchanged: workers started by the Trainer ignore SIGINT
(:func:`alf.utils.process_signals.sigint_ignored_in_children`) and are
closed by it; elsewhere gymnasium's worker reports the ``KeyboardInterrupt``
to the live parent as before.
"""
import functools
import os
import signal
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterable

import gymnasium as gym

from gymnasium.vector.async_vector_env import _async_worker  # the loop we wrap, not a copy

from alf.errors import EnvRaisedError, RunFailedError, UserError
from alf.utils.parent_watchdog import start_parent_watchdog

WATCHDOG_PERIOD_S = 0.5
"""How often a worker checks that its parent process is still alive (seconds)."""

_PIPE_GONE = (EOFError, BrokenPipeError, ConnectionResetError)


class ParentGone(BaseException):
    """The parent closed the command pipe (normally: it died). A ``BaseException`` so that
    gymnasium's worker does not report it through that very pipe."""


class _CommandPipe:
    """The worker's end of the command pipe, raising :class:`ParentGone` when the parent
    end is closed (``recv``: end of file; ``send``: broken pipe or connection reset)."""

    def __init__(self, conn: Connection):
        self._conn = conn

    def recv(self) -> Any:
        try:
            return self._conn.recv()
        except _PIPE_GONE:
            raise ParentGone() from None

    def send(self, obj: Any) -> None:
        try:
            self._conn.send(obj)
        except _PIPE_GONE:
            raise ParentGone() from None

    def close(self) -> None:
        self._conn.close()


def make_async_worker() -> Callable[..., None]:
    """The ``worker`` argument of ``AsyncVectorEnv`` for envs created by this process:
    :func:`async_worker` bound to this process's pid (picklable)."""
    return functools.partial(async_worker, os.getpid())


def async_worker(creator_pid: int, index: int, env_fn: Any, pipe: Connection,
                 parent_pipe: Connection, *args: Any) -> None:
    """gymnasium's worker loop (its arguments after ``creator_pid``: ``index, env_fn,
    pipe, parent_pipe, shared_memory, error_queue, autoreset_mode, semaphore``) that
    exits quietly and promptly when process ``creator_pid``, which made the
    ``AsyncVectorEnv``, dies. Use :func:`make_async_worker`.

    Module-level, so it pickles by reference for the ``spawn``/``forkserver``
    start methods. (The watchdog's pid test could be fooled if the creator's
    pid were reused within one period; the pipe test still ends an idle worker.)
    """
    for stop in (signal.SIGINT, signal.SIGTERM):  # the trainer decides how to stop
        signal.signal(stop, signal.SIG_IGN)
    # ends this process once its parent is gone (the creator with fork/spawn, the fork
    # server with forkserver, which itself waits for its workers) or the creator exited
    start_parent_watchdog(also_watch=creator_pid, period_s=WATCHDOG_PERIOD_S)
    try:
        _async_worker(index, env_fn, _CommandPipe(pipe), parent_pipe, *args)
    except ParentGone:
        pass


class NamedErrorsAsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """gymnasium's ``AsyncVectorEnv`` that does not log a worker's traceback when every
    failed worker's error is one of alf's one-line errors (an env's own exception named by
    :class:`~alf.errors.EnvRaisedError`, a :class:`~alf.errors.UserError` or
    :class:`~alf.errors.RunFailedError`): the run reports that line, and the ~20 lines a
    worker of gymnasium logs per error would bury it. Any other error (alf's or
    gymnasium's own bug) keeps gymnasium's log with its traceback."""

    def _raise_if_errors(self, successes: Iterable[bool]) -> None:
        successes = list(successes)
        if all(successes):
            return
        errors = [self.error_queue.get() for _ in range(len(successes) - sum(successes))]
        for error in errors:  # put back, in order, for gymnasium's own handling
            self.error_queue.put(error)
        named = all(isinstance(error[1], type) and issubclass(error[1], _NAMED_ERRORS)
                    for error in errors)
        if not named:
            return super()._raise_if_errors(successes)
        level = gym.logger.min_level
        gym.logger.min_level = gym.logger.ERROR + 1
        try:
            return super()._raise_if_errors(successes)
        finally:
            gym.logger.min_level = level


_NAMED_ERRORS = (EnvRaisedError, UserError, RunFailedError)
