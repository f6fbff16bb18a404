"""Optimizer factories: every factory builds a working torch optimizer with its settings."""
import pytest
import torch

from alf.utils import optimizers
from alf.utils.optimizers import OptimizerFactory
from alf.utils.schedules import LinearSchedule


@pytest.mark.parametrize("name, cls, expected", [
    ("Adam", torch.optim.Adam, {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False}),
    ("AdamW", torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.01}),
    ("RMSprop", torch.optim.RMSprop, {"lr": 7e-4, "alpha": 0.99, "eps": 1e-5}),
    ("SGD", torch.optim.SGD, {"lr": 1e-2, "momentum": 0.0}),
])
def test_factory_defaults_build_and_step(name, cls, expected):
    factory = getattr(optimizers, name)()
    # Adam is built as FastAdam, a torch.optim.Adam subclass with a leaner step()
    assert isinstance(factory, OptimizerFactory) and issubclass(factory.optimizer_cls, cls)
    assert factory.gradient_clipping is None
    p = torch.nn.Parameter(torch.ones(3))
    opt = factory.create([p])
    assert isinstance(opt, cls)
    group = opt.param_groups[0]
    for key, value in expected.items():
        assert group[key] == pytest.approx(value), key
    (p * torch.tensor([1.0, -1.0, 2.0])).sum().backward()
    opt.step()
    assert not torch.equal(p.detach(), torch.ones(3))
    assert name in repr(factory)


def test_factory_arguments_reach_the_optimizer():
    factory = optimizers.Adam(lr=LinearSchedule(0.5, 0.0), betas=[0.8, 0.9], eps=1e-5,
                              weight_decay=0.1, gradient_clipping=2.0)
    assert factory.gradient_clipping == 2.0
    opt = factory.create([torch.nn.Parameter(torch.zeros(2))])
    group = opt.param_groups[0]
    assert group["lr"] == 0.5  # the schedule's value at progress 0
    assert group["betas"] == (0.8, 0.9) and group["eps"] == 1e-5 and group["weight_decay"] == 0.1
    opt = optimizers.SGD(lr=0.3, momentum=0.9).create([torch.nn.Parameter(torch.zeros(2))])
    assert opt.param_groups[0]["momentum"] == 0.9 and opt.param_groups[0]["lr"] == 0.3
    opt = optimizers.RMSprop(alpha=0.5, momentum=0.1).create([torch.nn.Parameter(torch.zeros(2))])
    assert opt.param_groups[0]["alpha"] == 0.5 and opt.param_groups[0]["momentum"] == 0.1


def test_sgd_lr_one_applies_the_raw_gradient():
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = optimizers.SGD(lr=1.0).create([p])
    (p * torch.tensor([0.5, -3.0])).sum().backward()
    opt.step()
    assert p.detach().tolist() == pytest.approx([0.5, 5.0])
