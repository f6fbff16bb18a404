"""Ctrl-C and SIGTERM in a sweep or PBT process: a flag its loop checks, not an exception.

An exception raised wherever the signal lands could cut a write to the study's storage
in half; a flag lets the loop finish its step, stop every run it started (each saves a
checkpoint) and end their trials before the process exits with the usual status (130
for Ctrl-C, 143 for SIGTERM, through :func:`raise_if_stopped`).
"""
import signal
from typing import Any, Callable, Optional

from alf.trainers.interrupt_guard import Terminated


class StopRequest:
    """While entered, SIGINT and SIGTERM set :attr:`signum` (the first one) and say
    ``message`` once; leaving restores the previous handlers.

    Args:
        say: prints one line.
        message: what the process does now, e.g. "each running run saves a checkpoint".
    """

    def __init__(self, say: Callable[[str], None], message: str):
        self.signum: Optional[int] = None
        self._say = say
        self._message = message
        self._previous: dict = {}

    def __enter__(self) -> "StopRequest":
        self._previous = {s: signal.signal(s, self._on_signal)
                          for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:  # noqa: ARG002 - signal API
        if self.signum is None:
            self.signum = signum
            self._say(self._message)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def raise_if_stopped(self) -> None:
        """KeyboardInterrupt (Ctrl-C) or Terminated (SIGTERM) if a stop was requested."""
        if self.signum is not None:
            raise KeyboardInterrupt if self.signum == signal.SIGINT else Terminated
