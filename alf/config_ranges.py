"""Declared value ranges of configurable parameters, written with their type hints.

Why: a type hint says that a number goes there, not which numbers make sense, so
``PPOAlgorithm.gamma=1.5`` was accepted and ``TrainerConfig.num_iterations=-5`` ran a
whole training. A parameter with a natural range declares it in its annotation::

    def __init__(self, gamma: Discount = 0.99, num_critics: PositiveInt = 2,
                 lr: PositiveSchedule = 1e-3, tau: Annotated[float, Range(0, 1, low_open=True)] = 0.005)

:mod:`alf.config_checks` reads the range where it reads the type (right after a gin file
is parsed, before anything is built or written) and reports a value outside it in the same
one-line form as a wrong type; ``--describe`` shows it. ``typing.Annotated`` metadata is
ignored by Python and by type checkers (``Discount`` is a ``float``), so a declaration
changes nothing else. This module only declares; it imports nothing from alf.
"""
import collections.abc
import dataclasses
import math
import typing
from typing import Annotated, Any, Callable, Optional, Union


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of numbers: ``low``/``high`` (None: unbounded), each closed unless
    ``low_open``/``high_open``; ``note`` is shown after it (``"0: no limit"``).
    ``finite``: infinities are out too (a value that enters the maths of training: a
    learning rate, a schedule's value, a reward weight, a clipping norm or loss weight,
    where ``1e999`` parses as ``inf`` and turns the weights into NaN)."""
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    note: str = ""
    finite: bool = False

    def __contains__(self, value: float) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        if self.finite and isinstance(value, float) and math.isinf(value):
            return False
        if self.low is not None and (value < self.low or self.low_open and value == self.low):
            return False
        if self.high is not None and (value > self.high or
                                      self.high_open and value == self.high):
            return False
        return True

    def describe(self, with_note: bool = True) -> str:
        """``"in [0, 1]"``, ``"in (0, 1]"``, ``">= 1"``, ``"> 0"``, ``"<= 1"``, plus the note."""
        if self.low is not None and self.high is not None:
            text = (f"in {'(' if self.low_open else '['}{_number(self.low)}, "
                    f"{_number(self.high)}{')' if self.high_open else ']'}")
        elif self.low is not None:
            text = f"{'>' if self.low_open else '>='} {_number(self.low)}"
        elif self.high is not None:
            text = f"{'<' if self.high_open else '<='} {_number(self.high)}"
        else:
            text = "a finite number" if self.finite else "any number"
        return f"{text} ({self.note})" if self.note and with_note else text


def _number(x: float) -> str:
    """``0.5``, ``1e-08``; a whole number in full (``4294967295``, not ``4.29497e+09``)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


# numbers of one kind (read the annotation as the kind, the Range as its meaning)
Discount = Annotated[float, Range(0, 1)]            # gamma: a discount factor
UnitInterval = Annotated[float, Range(0, 1)]        # lambdas, fractions, mixing weights
Probability = Annotated[float, Range(0, 1)]         # epsilon-greedy, priority exponents
UpdateRate = Annotated[float, Range(0, 1, low_open=True)]  # soft target update tau
Positive = Annotated[float, Range(0, low_open=True)]        # learning rates, eps, timeouts
NonNegative = Annotated[float, Range(0)]            # loss weights, noise scales, margins
PositiveInt = Annotated[int, Range(1)]              # sizes, periods, intervals, counts of things
NonNegativeInt = Annotated[int, Range(0)]           # counts where 0 means none

# ... that must also be finite (they enter the maths of training; see Range.finite)
Finite = Annotated[float, Range(finite=True)]                 # schedule values, reward weights
FinitePositive = Annotated[float, Range(0, low_open=True, finite=True)]  # clipping norms
FiniteNonNegative = Annotated[float, Range(0, finite=True)]   # loss weights, weight decay

# a number in the range, or a schedule of training progress (checked when called); the
# number is finite (learning rates, clip ranges: an infinite one only makes NaN weights)
PositiveSchedule = Union[FinitePositive, Callable[[float], float]]
NonNegativeSchedule = Union[FiniteNonNegative, Callable[[float], float]]
UnitIntervalSchedule = Union[UnitInterval, Callable[[float], float]]
FiniteSchedule = Union[Finite, Callable[[float], float]]      # e.g. Agent.reward_weights


def declared_range(annotation: Any) -> str:
    """What ``--describe`` says about the range ``annotation`` declares: ``"in [0, 1]"``,
    ``"items in [0, 1)"`` (a list/tuple of ranged numbers), or ``""`` (none declared).
    Notes are left out: the parameter's help says what its special values mean."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        ranges = [m for m in annotation.__metadata__ if isinstance(m, Range)]
        return ranges[0].describe(with_note=False) if ranges else declared_range(args[0])
    if origin is Union:
        return next((r for r in map(declared_range, args) if r), "")
    if origin in (list, tuple, collections.abc.Sequence) and args:
        inner = [declared_range(a) for a in args if a is not Ellipsis]
        if inner and inner[0] and all(r == inner[0] for r in inner):
            return "items " + inner[0]
    return ""


def at_least(low: float, note: str = "", kind: type = int) -> type:
    """``Annotated[kind, Range(low, note=note)]``: e.g. ``at_least(0, "0: no limit")``."""
    return Annotated[kind, Range(low, note=note)]


__all__ = ["Range", "Discount", "UnitInterval", "Probability", "UpdateRate", "Positive",
           "NonNegative", "PositiveInt", "NonNegativeInt", "Finite", "FinitePositive",
           "FiniteNonNegative", "PositiveSchedule", "NonNegativeSchedule",
           "UnitIntervalSchedule", "FiniteSchedule", "at_least", "declared_range"]
