"""Ctrl-C handling for the Trainer: stop at an iteration boundary, never mid-save.

Semantics (main thread only; elsewhere signals are left alone):

- first Ctrl-C during training: the current iteration finishes, then the
  trainer saves a checkpoint and stops;
- second Ctrl-C: a reminder that it is finishing the iteration (a user who
  presses twice still gets a consistent checkpoint);
- third Ctrl-C: the iteration is abandoned at once (:class:`IterationAbandoned`)
  and *not* saved: a half-done iteration (interrupted mid optimizer step or
  mid replay write) is not a trustworthy state, so the run resumes from its
  newest checkpoint, as after a crash;
- any Ctrl-C while a checkpoint is being written, or while the trainer shuts
  down (final save, closing env workers): deferred. It only prints that the
  trainer is stopping; a save is never cut short, because a half-written
  checkpoint is a lost run. (``Ctrl-\\``, SIGQUIT, still kills the process at
  once; checkpoints are written to a temporary name and renamed, so that,
  too, leaves the previous one intact.)

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
    """Training stopped on Ctrl-C.

    Attributes:
        checkpoint: the file written on the way out; None when the newest checkpoint was
            already current or the iteration was abandoned.
        iteration: the iteration the run stopped in.
        abandoned: a third Ctrl-C abandoned the iteration; nothing was saved for it.
        newest: the newest checkpoint on disk (what a rerun resumes from), if any.
    """

    def __init__(self, checkpoint: Optional[str], iteration: int, abandoned: bool = False,
                 newest: Optional[str] = None):
        super().__init__(checkpoint)
        self.checkpoint = checkpoint
        self.iteration = iteration
        self.abandoned = abandoned
        self.newest = newest


class IterationAbandoned(KeyboardInterrupt):
    """The third Ctrl-C: stop in the middle of the iteration, saving nothing for it."""


class StopAtBoundary(KeyboardInterrupt):
    """Raised by the training loop at an iteration boundary after a Ctrl-C request."""


class InterruptedBeforeTraining(KeyboardInterrupt):
    """Ctrl-C while the experiment was being built (nothing was written or saved)."""


class InterruptGuard:
    """Installs the SIGINT handler described in the module docstring while active.

    Args:
        quiet: do not print what a Ctrl-C does (data-parallel ranks other than 0, whose
            lines would repeat rank 0's).
    Attributes:
        requested: a Ctrl-C asked the loop to stop at the next iteration boundary.
    """

    def __init__(self, quiet: bool = False):
        self._quiet = quiet
        self.requested = False
        self.presses = 0
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
        say = (lambda text: None) if self._quiet else _say  # noqa: E731
        if self._shield_depth:
            self._pending += 1
            say("Ctrl-C: the trainer is stopping (writing the checkpoint, closing env "
                "workers); please wait. Ctrl-\\ kills at once; the previous checkpoint "
                "stays intact.")
            return
        self.presses += 1
        if self.presses == 1:
            self.requested = True
            say("Ctrl-C: finishing the current iteration, then saving a checkpoint and "
                "stopping.")
        elif self.presses == 2:
            say("Ctrl-C: still finishing the current iteration so that the checkpoint is "
                "consistent. Press Ctrl-C once more to stop now WITHOUT saving this "
                "iteration (a rerun resumes from the newest checkpoint).")
        else:
            raise IterationAbandoned

    def press(self) -> None:
        """Count one more Ctrl-C as if SIGINT had arrived (a data-parallel rank's SIGTERM
        from torchrun while every rank is alive: stop at the boundary and save)."""
        self._handle(signal.SIGINT, None)

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Defer Ctrl-C inside this block (checkpoint writes, shutdown); a Ctrl-C that
        arrived inside counts afterwards as a request to stop at the iteration boundary."""
        self._shield_depth += 1
        try:
            yield
        finally:
            self._shield_depth -= 1
            if not self._shield_depth and self._pending:
                self._pending = 0
                self.requested = True
                self.presses = max(self.presses, 1)


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
