"""Ctrl-C and SIGTERM handling for the Trainer: stop at an iteration boundary, never
mid-save.

SIGTERM (``kill``, ``docker stop``, Slurm, Kubernetes) is handled exactly like Ctrl-C
(SIGINT) and counted with it; only the words and the exit status differ (143 instead
of 130, see :func:`exit_status`). Semantics (main thread only; elsewhere signals are
left alone):

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
(:func:`alf.utils.process_signals.sigint_ignored_in_children`) and ignore SIGTERM
themselves: a terminal Ctrl-C reaches the whole process group, Slurm sends SIGTERM to
every process of the job, and the trainer alone decides how to stop, then closes them.
"""
import contextlib
import os
import signal
import sys
import threading
from typing import Any, Dict, Iterator, Optional, Tuple

from alf.utils.process_signals import STOP_SIGNALS, restore_handlers

#: why a run stops: ``(signum, cause)``, cause a few words such as "the launcher (pid 7)
#: exited" when the signal was not sent by a person
StopReason = Tuple[int, Optional[str]]


def signal_label(signum: int) -> str:
    """How messages name the signal: "Ctrl-C" for SIGINT, else its name ("SIGTERM")."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def stop_signal(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt (SIGINT unless it carries ``signum``)."""
    return int(getattr(exc, "signum", signal.SIGINT))


def exit_status(exc: BaseException) -> int:
    """``128 + signum``, the shell's convention: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + stop_signal(exc)


def stop_words(reason: Optional[StopReason]) -> str:
    """How a stop is described: "interrupted" (Ctrl-C), "stopped by SIGTERM", or
    "stopped because the launcher (pid 7) exited"."""
    signum, cause = reason or (signal.SIGINT, None)
    if cause:
        return f"stopped because {cause}"
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal_label(signum)}"


def with_reason(exc: BaseException, reason: Optional[StopReason]) -> BaseException:
    """``exc`` carrying ``reason`` (as ``signum`` / ``cause``); returns it."""
    if reason is not None:
        exc.signum, exc.cause = reason
    return exc


class Terminated(KeyboardInterrupt):
    """SIGTERM outside the training loop (while building, in play or export_dataset): the
    command stops like on Ctrl-C, with exit status 143."""
    signum = signal.SIGTERM
    cause = None


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
                 newest: Optional[str] = None, reason: Optional[StopReason] = None):
        super().__init__(checkpoint)
        self.checkpoint = checkpoint
        self.iteration = iteration
        self.abandoned = abandoned
        self.newest = newest
        self.signum, self.cause = reason or (signal.SIGINT, None)


class IterationAbandoned(KeyboardInterrupt):
    """The third Ctrl-C: stop in the middle of the iteration, saving nothing for it."""


class StopAtBoundary(KeyboardInterrupt):
    """Raised by the training loop at an iteration boundary after a Ctrl-C request."""


class InterruptedBeforeTraining(KeyboardInterrupt):
    """Ctrl-C while the experiment was being built (nothing was written or saved)."""


class InterruptGuard:
    """Installs the handler described in the module docstring for ``signals`` while
    active.

    Args:
        quiet: do not print what a Ctrl-C does (data-parallel ranks other than 0, whose
            lines would repeat rank 0's).
        signals: the signals handled; a data-parallel rank leaves SIGTERM to its
            :class:`~alf.distributed.faults.StopHandler`, which calls :meth:`press`.
    Attributes:
        requested: a Ctrl-C asked the loop to stop at the next iteration boundary.
        reason: ``(signum, cause)`` of the first stop request, None before one.
    """

    def __init__(self, quiet: bool = False, signals: Tuple[int, ...] = STOP_SIGNALS):
        self._quiet = quiet
        self._signals = tuple(signals)
        self.requested = False
        self.presses = 0
        self.reason: Optional[StopReason] = None
        self._previous: Dict[int, Any] = {}
        self._shield_depth = 0
        self._pending = 0

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is threading.main_thread():
            for signum in self._signals:
                try:
                    self._previous[signum] = signal.signal(signum, self._handle)
                except (ValueError, OSError):  # e.g. embedded interpreters
                    pass
        return self

    def __exit__(self, *exc) -> None:
        restore_handlers(self._previous)
        self._previous = {}

    def _handle(self, signum, frame, cause: Optional[str] = None) -> None:
        say = (lambda text: None) if self._quiet else _say  # noqa: E731
        label = signal_label(signum)
        if self._shield_depth:
            self._pending += 1
            if self.reason is None:
                self.reason = (signum, cause)
            say(f"{label}: the trainer is stopping (writing the checkpoint, closing env "
                "workers); please wait. Ctrl-\\ kills at once; the previous checkpoint "
                "stays intact.")
            return
        self.presses += 1
        if self.presses == 1:
            self.requested = True
            self.reason = (signum, cause)
            say(f"{cause[0].upper() + cause[1:] if cause else label}: finishing the current "
                "iteration, then saving a checkpoint and stopping.")
        elif self.presses == 2:
            again = "Press Ctrl-C" if signum == signal.SIGINT else f"Send {label}"
            say(f"{label}: still finishing the current iteration so that the checkpoint is "
                f"consistent. {again} once more to stop now WITHOUT saving this "
                "iteration (a rerun resumes from the newest checkpoint).")
        else:
            raise with_reason(IterationAbandoned(), self.reason)

    def press(self, signum: int = signal.SIGINT, cause: Optional[str] = None) -> None:
        """Count one more stop request as if ``signum`` had arrived (a data-parallel rank's
        SIGTERM from torchrun while every rank is alive: stop at the boundary and save).

        Args:
            cause: why, when no person sent the signal, e.g. "the launcher (pid 7) exited".
        """
        self._handle(signum, None, cause)

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

