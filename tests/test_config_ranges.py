"""Declared ranges (``alf.config_ranges``): their wording, how a value is judged through
Optional/Union/sequence annotations, that no default breaks its own range, that every
bundled example still parses, and that TrainerConfig checks them when built from Python.
The real command's messages are tested in tests/bin/test_value_ranges_cli.py."""
import inspect
import os
import typing
from typing import Annotated, Optional, Sequence, Tuple

import pytest

from alf.config_checks import matches, out_of_range
from alf.config_ranges import (Discount, PositiveInt, PositiveSchedule, Range, UpdateRate,
                               declared_range)
from alf.errors import ConfigError

BETA = Annotated[float, Range(0, 1, high_open=True)]


@pytest.mark.parametrize("rng, text", [
    (Range(0, 1), "in [0, 1]"), (Range(0, 1, low_open=True), "in (0, 1]"),
    (Range(0, 1, high_open=True), "in [0, 1)"), (Range(1), ">= 1"),
    (Range(0, low_open=True), "> 0"), (Range(high=1), "<= 1"),
    (Range(0, note="0: no limit"), ">= 0 (0: no limit)"), (Range(1e-8), ">= 1e-08"),
    (Range(0, 2 ** 32 - 1), "in [0, 4294967295]"), (Range(0.5, 1e6), "in [0.5, 1000000]"),
])
def test_range_wording(rng, text):
    assert rng.describe() == text


def test_range_membership_open_closed_and_nan():
    assert 0 in Range(0, 1) and 1 in Range(0, 1) and 1.01 not in Range(0, 1)
    assert 0 not in Range(0, 1, low_open=True) and 1 not in Range(0, 1, high_open=True)
    assert float("nan") not in Range(0, 1) and float("inf") in Range(0)


@pytest.mark.parametrize("value, annotation, why", [
    (1.5, Discount, "it must be in [0, 1]"), (0.99, Discount, None), (1, Discount, None),
    (0, UpdateRate, "it must be in (0, 1]"), (None, Optional[PositiveInt], None),
    (0, Optional[PositiveInt], "it must be >= 1"), (-1, PositiveSchedule, "it must be > 0"),
    ("abc", Discount, None),  # a wrong type is the type check's to report
    (True, PositiveInt, None), ((0.9, 1.0), Tuple[BETA, BETA], "item 2 must be in [0, 1)"),
    ([2, 0, 1], Sequence[PositiveInt], "item 2 must be >= 1"), (0.5, float, None),
])
def test_out_of_range(value, annotation, why):
    assert out_of_range(value, annotation) == why


def test_ranged_types_are_their_plain_types():
    assert matches(0.5, Discount) is True and matches("x", Discount) is False
    assert typing.get_type_hints(_f) == {"gamma": float, "n": Optional[int]}
    assert declared_range(Optional[PositiveInt]) == ">= 1"
    assert declared_range(Tuple[BETA, BETA]) == "items in [0, 1)" and declared_range(int) == ""


def _f(gamma: Discount = 0.9, n: Optional[PositiveInt] = None):
    return gamma, n


def test_every_default_lies_in_its_declared_range():
    """A declaration must never reject its own parameter's default."""
    import alf  # noqa: F401 - registers every configurable
    from alf.config_help import configurables
    wrong = []
    for c in configurables():
        target = c.target.__init__ if inspect.isclass(c.target) else c.target
        hints = typing.get_type_hints(target, include_extras=True)
        for name, p in inspect.signature(target).parameters.items():
            if name in hints and p.default is not inspect.Parameter.empty:
                why = out_of_range(p.default, hints[name])
                if why:
                    wrong.append(f"{c.name}.{name} = {p.default!r}: {why}")
    assert wrong == []


def test_every_bundled_example_still_parses(clean_gin):
    """The declared ranges accept every value the example gin files set."""
    from alf import config as alf_config
    for name in sorted(os.listdir(alf_config.EXAMPLES_DIR)):
        if name.endswith(".gin"):
            alf_config.parse_config(conf_file=name)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_iterations": -5, "num_env_steps": 100},
     "TrainerConfig.num_iterations = -5 is out of range: it must be >= 0 (0: no limit)"),
    ({"num_iterations": 3, "num_env_steps": -5},
     "TrainerConfig.num_env_steps = -5 is out of range: it must be >= 0 (0: no limit)"),
    ({"num_env_steps": -5},
     "TrainerConfig.num_env_steps = -5 is out of range: it must be >= 0 (0: no limit)"),
    ({"num_iterations": 1, "offline_fraction": 1.5},
     "TrainerConfig.offline_fraction = 1.5 is out of range: it must be in [0, 1]"),
    ({"num_iterations": 1, "milestone_env_steps": -1},
     "TrainerConfig.milestone_env_steps = -1 is out of range: it must be >= 0 (0: off)"),
    ({"num_iterations": 1, "milestone_seconds": -0.5},
     "TrainerConfig.milestone_seconds = -0.5 is out of range: it must be >= 0 (0: off)"),
])
def test_trainer_config_built_from_python_checks_ranges(kwargs, message, clean_gin):
    from alf.trainers.trainer_config import TrainerConfig
    with pytest.raises(ConfigError) as e:
        TrainerConfig(algorithm_ctor=object, **kwargs)
    assert str(e.value).splitlines()[0] == message


def test_describe_shows_the_declared_range():
    from alf import config_help
    config_help.register_all()
    # wrapped to the terminal's width: compare the words
    gamma = config_help.describe("PPOAlgorithm.gamma")
    assert " ".join(gamma.split()).endswith("Must be in [0, 1].")
    betas = config_help.describe("alf.optimizers.Adam.betas")
    assert " ".join(betas.split()).endswith("Items must be in [0, 1).")
    assert "Must be" not in config_help.describe("PPOAlgorithm.actor_network_ctor")
