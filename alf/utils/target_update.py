"""Target networks: a frozen copy of a module that trails it (DQN, SAC, DDPG, TD3).

``make_target(module)`` copies a module and freezes the copy (so no optimizer
ever claims its parameters); ``TargetUpdater`` moves the copies towards the
online modules every ``period`` calls with ``target <- (1-tau) target + tau
online`` as one fused ``torch._foreach_lerp_`` over all parameters (``tau=1``
is a hard copy, DQN style).
"""
import copy
from typing import List, Optional, Sequence, Union

import torch
from torch import nn


def make_target(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` with ``requires_grad=False`` on every parameter."""
    target = copy.deepcopy(module)
    for p in target.parameters():
        p.requires_grad_(False)
    return target


class TargetUpdater:
    """Soft/hard updates of target modules.

    Args:
        models: online module(s).
        target_models: matching target module(s) (same architecture, same order).
        tau: interpolation factor in (0, 1]; 1 copies.
        period: update on every ``period``-th call (DQN's ``target_update_interval``).
    """

    def __init__(self, models: Union[nn.Module, Sequence[nn.Module]],
                 target_models: Union[nn.Module, Sequence[nn.Module]], tau: float = 1.0,
                 period: int = 1):
        models = [models] if isinstance(models, nn.Module) else list(models)
        targets = [target_models] if isinstance(target_models, nn.Module) else list(target_models)
        if len(models) != len(targets):
            raise ValueError(f"TargetUpdater: {len(models)} models but {len(targets)} targets")
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"TargetUpdater: tau must be in (0, 1], got {tau}")
        if period < 1:
            raise ValueError(f"TargetUpdater: period must be >= 1, got {period}")
        self._params: List[torch.Tensor] = []
        self._target_params: List[torch.Tensor] = []
        self._buffers: List[torch.Tensor] = []
        self._target_buffers: List[torch.Tensor] = []
        for m, t in zip(models, targets):
            p, tp = list(m.parameters()), list(t.parameters())
            b, tb = list(m.buffers()), list(t.buffers())
            if [x.shape for x in p] != [x.shape for x in tp] or len(b) != len(tb):
                raise ValueError(f"TargetUpdater: {type(m).__name__} and its target differ in "
                                 "parameter shapes")
            self._params += p
            self._target_params += tp
            self._buffers += b
            self._target_buffers += tb
        self._tau = float(tau)
        self._period = int(period)
        self._count = 0

    @torch.no_grad()
    def copy(self) -> None:
        """Hard copy online -> target (at construction of an algorithm)."""
        torch._foreach_copy_(self._target_params, self._params)
        for t, b in zip(self._target_buffers, self._buffers):
            t.copy_(b)

    def __call__(self, step: Optional[int] = None) -> bool:
        """Count one update; returns True when the targets moved.

        ``step``: the global update counter (e.g. ``RunContext.num_updates``, which is
        checkpointed, so the period stays in phase across a resume); None uses an
        internal count.
        """
        self._count += 1
        if (self._count if step is None else int(step)) % self._period:
            return False  # the common case for hard copies: no grad-mode switch needed
        with torch.no_grad():
            if self._tau == 1.0:
                self.copy()
            else:
                torch._foreach_lerp_(self._target_params, self._params, self._tau)
                for t, b in zip(self._target_buffers, self._buffers):
                    t.copy_(b)
        return True
