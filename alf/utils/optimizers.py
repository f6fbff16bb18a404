"""Optimizer factories usable from gin.

A torch optimizer needs its parameters at construction, but a gin file is
parsed before any network exists. So ``@alf.optimizers.Adam()`` in gin builds an
:class:`OptimizerFactory`; the algorithm calls ``factory.create(params)`` once
its networks exist. The factory also carries what torch optimizers do not:
global-norm gradient clipping and a learning-rate schedule.
"""
import inspect
from typing import Annotated, Any, Dict, FrozenSet, Iterable, Optional, Tuple, Type

import gin
import torch

from alf.config_ranges import (FiniteNonNegative, FinitePositive, NonNegative, NonNegativeSchedule,
                               Range, UnitInterval)
from alf.utils.fast_optim import FastAdam
from alf.utils.schedules import ScheduleLike, as_schedule


Beta = Annotated[float, Range(0, 1, high_open=True)]  # Adam's moment decay rates


class OptimizerFactory:
    """Recipe for an optimizer: class, learning rate (number or schedule), clipping, kwargs."""

    def __init__(self, optimizer_cls: Type[torch.optim.Optimizer], lr: ScheduleLike,
                 gradient_clipping: Optional[FinitePositive] = None, **kwargs: Any):
        self.optimizer_cls = optimizer_cls
        self.lr_schedule = as_schedule(lr)
        self.gradient_clipping = gradient_clipping
        self.kwargs = kwargs

    def create(self, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        """Build the torch optimizer over ``params`` with the schedule's initial lr."""
        return self.optimizer_cls(list(params), lr=self.lr_schedule(0.0), **self.kwargs)

    def __repr__(self):
        return (f"{self.optimizer_cls.__name__}(lr={self.lr_schedule}, "
                f"gradient_clipping={self.gradient_clipping}, {self.kwargs})")


def _fast_kwargs(optimizer_cls: Type[torch.optim.Optimizer]) -> Dict[str, Any]:
    # Fused (else foreach) kernels cut the per-parameter Python loop; measured faster on CPU
    # for small nets. Not every optimizer has a fused kernel (RMSprop has none).
    params = inspect.signature(optimizer_cls.__init__).parameters
    if "fused" in params:
        return {"fused": True}
    return {"foreach": True} if "foreach" in params else {}


@gin.configurable(module="alf.optimizers")
def Adam(lr: NonNegativeSchedule = 1e-3, betas: Tuple[Beta, Beta] = (0.9, 0.999),
         eps: NonNegative = 1e-8,
         weight_decay: FiniteNonNegative = 0.0,
         gradient_clipping: Optional[FinitePositive] = None,
         amsgrad: bool = False) -> OptimizerFactory:
    """Adam (Kingma & Ba 2015) as :class:`alf.utils.fast_optim.FastAdam`: torch's Adam with
    a low-overhead step (identical numbers and ``state_dict``).

    Args:
        lr: learning rate: a number, or a schedule of training progress in [0, 1]
            (e.g. ``@LinearSchedule()``).
        gradient_clipping: clip the global gradient norm to this (None = no clipping).
        betas: decay rates of the first and second moment estimates.
        eps: added to the denominator for numerical stability.
        weight_decay: L2 penalty added to the gradient.
        amsgrad: use the AMSGrad variant (max of past second moments).
    """
    return OptimizerFactory(FastAdam, lr, gradient_clipping, betas=tuple(betas), eps=eps,
                            weight_decay=weight_decay, amsgrad=amsgrad)


@gin.configurable(module="alf.optimizers")
def AdamW(lr: NonNegativeSchedule = 1e-3, betas: Tuple[Beta, Beta] = (0.9, 0.999),
          eps: NonNegative = 1e-8,
          weight_decay: FiniteNonNegative = 0.01,
          gradient_clipping: Optional[FinitePositive] = None) -> OptimizerFactory:
    """AdamW (Loshchilov & Hutter 2019: decoupled weight decay).

    Args:
        lr: learning rate: a number, or a schedule of training progress in [0, 1]
            (e.g. ``@LinearSchedule()``).
        gradient_clipping: clip the global gradient norm to this (None = no clipping).
        betas: decay rates of the first and second moment estimates.
        eps: added to the denominator for numerical stability.
        weight_decay: decoupled weight decay per step (times lr).
    """
    return OptimizerFactory(torch.optim.AdamW, lr, gradient_clipping, betas=tuple(betas), eps=eps,
                            weight_decay=weight_decay, **_fast_kwargs(torch.optim.AdamW))


@gin.configurable(module="alf.optimizers")
def RMSprop(lr: NonNegativeSchedule = 7e-4, alpha: UnitInterval = 0.99, eps: NonNegative = 1e-5,
            momentum: NonNegative = 0.0,
            gradient_clipping: Optional[FinitePositive] = None) -> OptimizerFactory:
    """RMSprop (SB3's A2C default uses alpha 0.99, eps 1e-5).

    Args:
        lr: learning rate: a number, or a schedule of training progress in [0, 1]
            (e.g. ``@LinearSchedule()``).
        gradient_clipping: clip the global gradient norm to this (None = no clipping).
        alpha: smoothing constant of the squared-gradient average.
        eps: added to the denominator for numerical stability.
        momentum: momentum factor (0 = none).
    """
    return OptimizerFactory(torch.optim.RMSprop, lr, gradient_clipping, alpha=alpha, eps=eps,
                            momentum=momentum, **_fast_kwargs(torch.optim.RMSprop))


@gin.configurable(module="alf.optimizers")
def SGD(lr: NonNegativeSchedule = 1e-2, momentum: NonNegative = 0.0,
        gradient_clipping: Optional[FinitePositive] = None
        ) -> OptimizerFactory:
    """Plain SGD with optional momentum.

    Args:
        lr: learning rate: a number, or a schedule of training progress in [0, 1]
            (e.g. ``@LinearSchedule()``).
        gradient_clipping: clip the global gradient norm to this (None = no clipping).
        momentum: momentum factor (0 = none).
    """
    return OptimizerFactory(torch.optim.SGD, lr, gradient_clipping, momentum=momentum,
                            **_fast_kwargs(torch.optim.SGD))


#: a factory's parameters that stay with the factory; every other one is passed to the
#: torch optimizer and so sits in its param groups
_FACTORY_PARAMS = frozenset({"lr", "gradient_clipping"})


def param_group_params() -> Dict[str, FrozenSet[str]]:
    """Each optimizer factory here (short name) -> its parameters held in the torch
    optimizer's param groups (all but ``lr`` and ``gradient_clipping``).

    ``Optimizer.load_state_dict`` restores the param groups whole, so a resume's change to
    one of these is undone by the checkpoint (alf/trainers/resume_overrides.py refuses it);
    ``lr`` is in the groups too but set from its schedule before every step.
    """
    return {name: frozenset(inspect.signature(fn).parameters) - _FACTORY_PARAMS
            for name, fn in globals().items()
            if inspect.isfunction(fn) and fn.__module__ == __name__
            and inspect.signature(fn).return_annotation is OptimizerFactory}
