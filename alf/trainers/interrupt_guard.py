"""Ctrl-C handling for the Trainer: stop at an iteration boundary, never mid-save.

Semantics (main thread only; elsewhere signals are left alone):

- first Ctrl-C during training: the current iteration finishes, then the
  trainer saves a checkpoint and stops;
- second Ctrl-C during training: the iteration is abandoned at once
  (``KeyboardInterrupt``), then the trainer saves and stops;
- any Ctrl-C while a checkpoint is being written, or while the trainer shuts
  down (final save, closing env workers): deferred. It only prints that the
  save is in progress; a save is never cut short, because a half-written
  checkpoint is a lost run. (``Ctrl-\\``, SIGQUIT, still kills the process at
  once for a user who really wants that; the checkpoint is written to a
  temporary name and renamed, so that, too, leaves the previous one intact.)

Env worker processes are started with SIGINT ignored
(:func:`sigint_ignored_in_children`): a terminal Ctrl-C reaches the whole
process group, and the trainer alone decides how to stop, then closes them.
"""
import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator, Optional


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on Ctrl-C; ``checkpoint`` is the file written on the way out
    (None when the newest checkpoint was already current, or nothing could be saved)."""

    def __init__(self, checkpoint: Optional[str], iteration: int):
        super().__init__(checkpoint)
        self.checkpoint = checkpoint
        self.iteration = iteration


class InterruptedBeforeTraining(KeyboardInterrupt):
    """Ctrl-C while the experiment was being built (nothing was written or saved)."""


class InterruptGuard:
    """Installs the SIGINT handler described in the module docstring while active.

    Attributes:
        requested: a Ctrl-C asked the loop to stop at the next iteration boundary.
    """

    def __init__(self):
        self.requested = False
        self._installed = False
        self._previous: Any = None
        self._shield_depth = 0
        self._pending = 0

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = signal.signal(signal.SIGINT, self._handle)
                self._installed = True
            except (ValueError, OSError):  # e.g. embedded interpreters
                pass
        return self

    def __exit__(self, *exc) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous if self._previous is not None
                          else signal.default_int_handler)
            self._installed = False

    def _handle(self, signum, frame) -> None:
        if self._shield_depth:
            self._pending += 1
            _say("Ctrl-C: a checkpoint is being written; stopping as soon as it is safe "
                 "(Ctrl-\\ kills at once; the previous checkpoint stays intact)")
            return
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        _say("Ctrl-C: finishing the current iteration, then saving "
             "(press Ctrl-C again to stop now)")

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Defer Ctrl-C inside this block (checkpoint writes, shutdown). A Ctrl-C that
        arrived inside counts afterwards as a request to stop (a second one: stop now)."""
        self._shield_depth += 1
        try:
            yield
        finally:
            self._shield_depth -= 1
            if not self._shield_depth and self._pending:
                again, self._pending = self.requested, 0
                self.requested = True
                if again and sys.exc_info()[0] is None:
                    raise KeyboardInterrupt


def _say(text: str) -> None:
    try:  # os.write: print() from a signal handler can hit a reentrant-write error
        os.write(sys.stderr.fileno(), ("\n" + text + "\n").encode())
    except (OSError, ValueError, AttributeError):
        pass


@contextlib.contextmanager
def sigint_ignored_in_children() -> Iterator[None]:
    """Env worker processes started in this block inherit SIGINT=ignore (kept across
    fork and exec), so a terminal Ctrl-C, which reaches the whole process group, does
    not kill them mid-step. Main thread only; the previous handler is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
