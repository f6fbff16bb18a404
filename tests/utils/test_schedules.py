"""Schedules: known values at progress 0 / 0.5 / 1, bounds, and gin use."""
import math

import gin
import numpy as np
import pytest

import alf
from alf.utils import optimizers
from alf.utils.schedules import (ConstantSchedule, ExponentialSchedule, LinearSchedule,
                                 as_schedule)


def test_constant_schedule():
    s = ConstantSchedule(3)
    assert [s(p) for p in (0.0, 0.5, 1.0)] == [3.0, 3.0, 3.0]
    assert isinstance(s(0.0), float)


def test_linear_schedule_values():
    s = LinearSchedule(1e-3)  # anneals to 0 by default (SB3's lin_1e-3)
    assert [s(p) for p in (0.0, 0.5, 1.0)] == pytest.approx([1e-3, 5e-4, 0.0])
    s = LinearSchedule(0.2, 0.1)
    assert [s(p) for p in (0.0, 0.25, 0.5, 1.0)] == pytest.approx([0.2, 0.175, 0.15, 0.1])


def test_linear_schedule_is_flat_outside_its_progress_window():
    s = LinearSchedule(1.0, 3.0, start_progress=0.25, end_progress=0.75)
    assert [s(p) for p in (0.0, 0.25, 0.5, 0.75, 1.0)] == pytest.approx([1.0, 1.0, 2.0, 3.0, 3.0])
    assert s(-1.0) == 1.0 and s(2.0) == 3.0
    with pytest.raises(ValueError, match="end_progress must exceed start_progress"):
        LinearSchedule(1.0, 0.0, start_progress=0.5, end_progress=0.5)


def test_exponential_schedule_values():
    s = ExponentialSchedule(1.0, decay=0.01)
    assert [s(p) for p in (0.0, 0.5, 1.0)] == pytest.approx([1.0, 0.1, 0.01])
    s = ExponentialSchedule(2.0, decay=0.5, decay_progress=0.25, minimum=0.3)
    assert [s(p) for p in (0.0, 0.25, 0.5, 1.0)] == pytest.approx([2.0, 1.0, 0.5, 0.3])


def test_as_schedule():
    assert isinstance(as_schedule(0.5), ConstantSchedule) and as_schedule(2)(0.7) == 2.0
    assert as_schedule(np.float32(0.25))(0.3) == 0.25  # numpy scalars are numbers too
    s = LinearSchedule(1.0)
    assert as_schedule(s) is s
    f = lambda p: 1 - p  # noqa: E731 - any callable of progress is a schedule
    assert as_schedule(f) is f
    with pytest.raises(TypeError, match="Expected a number or a schedule, got '0.1'"):
        as_schedule("0.1")


def test_gin_binds_a_schedule_as_optimizer_lr(clean_gin):
    alf.config.parse_config(config_text="""
alf.optimizers.Adam.lr = @LinearSchedule()
LinearSchedule.start = 0.1
alf.optimizers.Adam.gradient_clipping = 0.5
PPOLoss.importance_ratio_clipping = @clip/LinearSchedule()
clip/LinearSchedule.start = 0.2
clip/LinearSchedule.end = 0.1
""")
    factory = optimizers.Adam()
    assert isinstance(factory.lr_schedule, LinearSchedule)
    assert [factory.lr_schedule(p) for p in (0.0, 0.5, 1.0)] == pytest.approx([0.1, 0.05, 0.0])
    assert factory.gradient_clipping == 0.5
    from alf.algorithms.ppo_loss import PPOLoss
    clip = PPOLoss().clip_schedule  # the scoped binding, not the lr one
    assert [clip(p) for p in (0.0, 0.5, 1.0)] == pytest.approx([0.2, 0.15, 0.1])


def test_gin_number_lr_is_a_constant_schedule(clean_gin):
    alf.config.parse_config(config_text="alf.optimizers.SGD.lr = 0.25")
    factory = optimizers.SGD()
    assert isinstance(factory.lr_schedule, ConstantSchedule)
    assert factory.lr_schedule(0.9) == 0.25
