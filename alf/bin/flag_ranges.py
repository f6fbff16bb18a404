"""Declared value ranges of a command's numeric flags, checked before the command does
anything.

Why: absl checks that ``--seeds=-1`` or ``--resample_probability=2`` is a number, not
that it makes sense, so a sweep started its runs with ``TrainerConfig.random_seed=-1``
(each failed inside) and PBT trained a whole population with a probability of 2. A
command declares each numeric flag's range with the annotations gin parameters use
(:mod:`alf.config_ranges`), so the message has the same form as for a gin value::

    RANGES = {"parallel": PositiveInt, "quantile": Annotated[float, Range(0, 0.5, low_open=True)]}
    declare(RANGES)          # after its flags are defined: --help shows each range
    check(RANGES)            # first thing in its main: one ConfigError line, exit 2

A flag whose every value makes sense is declared with its plain type (``float``), so
that every numeric flag of a command is declared (tests/bin/test_study_flag_ranges.py).
"""
from typing import Any, Dict, Mapping, Optional

from absl import flags

from alf.config_checks import out_of_range
from alf.config_ranges import declared_range
from alf.errors import ConfigError


def declare(ranges: Mapping[str, Any]) -> None:
    """Append each flag's declared range to its ``--help`` text (once)."""
    for name, annotation in ranges.items():
        described = declared_range(annotation)
        flag = flags.FLAGS[name]
        note = f"Range: {described}."
        if described and note not in flag.help:
            flag.help = f"{flag.help.rstrip()} {note}"


def check(ranges: Mapping[str, Any], values: Optional[Dict[str, Any]] = None) -> None:
    """Raise :class:`ConfigError` for the first flag whose value lies outside its range.

    Args:
        ranges: flag name -> annotation (:mod:`alf.config_ranges`).
        values: flag name -> the value to judge where it is not the flag's own (e.g. the
            whole numbers of a list flag of strings); an unset (None) flag is not judged.
    """
    values = values or {}
    for name, annotation in ranges.items():
        value = values[name] if name in values else flags.FLAGS[name].value
        if value is None:
            continue
        why = out_of_range(value, annotation)
        if why:
            shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
            raise ConfigError(f"--{name}={shown} is out of range: {why}")


__all__ = ["declare", "check"]
