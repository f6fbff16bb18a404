"""``config_slice``: build a component's typed settings from the run's config.

A component (the Learner, the async unroller) receives the few ``TrainerConfig``
fields it reads as a frozen dataclass with the same field names; this copies them
by name, so the component's module need not import :mod:`alf.trainers`.
"""
import dataclasses
from typing import Any, Type, TypeVar

T = TypeVar("T")


def config_slice(cls: Type[T], config: Any) -> T:
    """``cls`` (a dataclass) from the same-named attributes of ``config``; a field that
    ``config`` lacks keeps its default."""
    names = [f.name for f in dataclasses.fields(cls)]
    return cls(**{n: getattr(config, n) for n in names if hasattr(config, n)})
