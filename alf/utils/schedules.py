"""Schedules: values that change with training progress (learning rates, clip ranges).

A schedule is a callable ``schedule(progress) -> float`` with ``progress`` in
[0, 1] taken from :class:`alf.utils.run_context.RunContext`. Plain numbers are
accepted everywhere a schedule is and mean "constant".
"""
import numbers
from typing import Callable, Union

import alf
from alf.config_ranges import Finite


class Schedule:
    """Base class: ``__call__(progress: float) -> float``."""

    def __call__(self, progress: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError


@alf.configurable
class ConstantSchedule(Schedule):
    """Always ``value``.

    Args:
        value: the constant.
    """

    def __init__(self, value: Finite):
        self.value = float(value)

    def __call__(self, progress: float) -> float:
        return self.value

    def __repr__(self):
        return f"ConstantSchedule({self.value})"


@alf.configurable
class LinearSchedule(Schedule):
    """Linear from ``start`` (at ``start_progress``) to ``end`` (at ``end_progress``), flat outside.

    ``LinearSchedule(1e-3, 0.0)`` is SB3's ``lin_1e-3`` (annealed to zero at the end of training).

    Args:
        start: value up to ``start_progress``.
        end: value from ``end_progress`` on.
        start_progress: training progress (0..1) where the ramp begins.
        end_progress: training progress (0..1) where the ramp ends.
    """

    def __init__(self, start: Finite, end: Finite = 0.0, start_progress: float = 0.0,
                 end_progress: float = 1.0):
        if end_progress <= start_progress:
            raise ValueError("LinearSchedule: end_progress must exceed start_progress")
        self.start, self.end = float(start), float(end)
        self.start_progress, self.end_progress = float(start_progress), float(end_progress)

    def __call__(self, progress: float) -> float:
        f = (progress - self.start_progress) / (self.end_progress - self.start_progress)
        f = min(1.0, max(0.0, f))
        return self.start + f * (self.end - self.start)

    def __repr__(self):
        return f"LinearSchedule({self.start} -> {self.end})"


@alf.configurable
class ExponentialSchedule(Schedule):
    """``start * decay ** (progress / decay_progress)``, floored at ``minimum``.

    Args:
        start: value at progress 0.
        decay: factor applied per ``decay_progress`` of training progress.
        decay_progress: training progress (0..1) over which the value is multiplied by ``decay``.
        minimum: the value never goes below this.
    """

    def __init__(self, start: Finite, decay: Finite = 0.1, decay_progress: float = 1.0,
                 minimum: Finite = 0.0):
        self.start, self.decay, self.decay_progress, self.minimum = start, decay, decay_progress, minimum

    def __call__(self, progress: float) -> float:
        return max(self.minimum, self.start * self.decay ** (progress / self.decay_progress))


ScheduleLike = Union[float, int, Callable[[float], float]]


def as_schedule(value: ScheduleLike) -> Callable[[float], float]:
    """Wrap numbers as :class:`ConstantSchedule`; return callables unchanged."""
    if isinstance(value, numbers.Real):  # includes numpy scalars (e.g. from np.linspace)
        return ConstantSchedule(value)
    if callable(value):
        return value
    raise TypeError(f"Expected a number or a schedule, got {value!r}")
