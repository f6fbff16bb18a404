"""``AgentPart``: what every sub-algorithm of an :class:`~alf.algorithms.agent.Agent`
shares (reward modules, representation learners; docs/design/agent.md).

A part is an ordinary :class:`~alf.algorithms.algorithm.Algorithm` with its own
optimizer (required: one error names the gin line to add), the env's specs, its own
training loss on transitions ``(prev_observation, prev_action, observation)`` ``[N]``
taken from stored experience, and one gradient step of that loss per trained batch
that is not counted in ``context.num_updates`` (the RL algorithm's clock). Every step
summarises the loss as ``Loss/<name>/loss`` (one point per summarised iteration).
"""
import abc
from typing import Any, Optional

import torch

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.errors import ConfigError
from alf.utils.normalizers import RunningMeanVar
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class AgentPart(Algorithm, metaclass=abc.ABCMeta):
    """Base class of an Agent's parts.

    Class attributes:
        uses_previous_step: whether :meth:`loss` reads ``prev_observation`` (False: it
            can also train on single-step mini-batches, where it is None).
        optimizer_example: ``(gin scope, learning rate)`` shown in the error for a
            missing optimizer.

    Args:
        observation_spec: the (transformed) observation spec of one step.
        action_spec: the env's action spec.
        optimizer: optimizer factory for the part's parameters (each part of an Agent
            trains with its own).
        context, debug_summaries, name: see :class:`Algorithm`.
    """

    uses_previous_step: bool = True
    optimizer_example = ("part", "1e-4")

    def __init__(self, observation_spec: Any, action_spec: Any,
                 optimizer: Optional[OptimizerFactory] = None,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "AgentPart"):
        if optimizer is None:
            scope, lr = self.optimizer_example
            raise ConfigError(f"{name} trains with its own optimizer: set {name}.optimizer, "
                              f"e.g. `{name}.optimizer = @{scope}/alf.optimizers.Adam()` and "
                              f"`{scope}/alf.optimizers.Adam.lr = {lr}`")
        super().__init__(optimizer=optimizer, context=context,
                         debug_summaries=debug_summaries, name=name)
        self._observation_spec = observation_spec
        self._action_spec = action_spec

    @property
    def observation_spec(self) -> Any:
        return self._observation_spec

    @property
    def action_spec(self) -> Any:
        return self._action_spec

    @abc.abstractmethod
    def loss(self, prev_observation: Any, prev_action: Any,
             observation: Any) -> torch.Tensor:
        """The part's own training loss per transition ``[N]``."""

    def update(self, prev_observation: Any, prev_action: Any, observation: Any,
               valid: torch.Tensor, keep_existing_grads: bool = False) -> LossInfo:
        """One gradient step of :meth:`loss` over the ``valid [N]`` transitions, on this
        part's parameters; not counted in ``context.num_updates``.

        Args:
            keep_existing_grads: add to the gradients already on the parameters (the
                RL loss's, for a shared encoder) instead of replacing them.
        """
        loss = self.loss(prev_observation, prev_action, observation)
        info = self.update_with_gradient(LossInfo(loss=loss), valid_masks=valid.to(loss.dtype),
                                         count_update=False,
                                         keep_existing_grads=keep_existing_grads)
        self.after_update_step()
        self.summarize_update(info)
        return info

    def summarize_update(self, info: LossInfo) -> None:
        """``Loss/<name>/loss``: the mean of the iteration's steps, one point per
        summarised iteration (a no-op on the others: nothing is read from the device).
        Called by every step of the part, whatever called it (the Agent's mini-batches of
        any length, a custom loop)."""
        self._context.add_iteration_scalar(f"Loss/{self._name}/loss", info.loss)

    def after_update_step(self) -> None:
        """Called after each :meth:`update` (e.g. to move a target encoder)."""

    def fold_statistics(self, stats: RunningMeanVar, x: torch.Tensor) -> None:
        """Fold ``x`` into ``stats``; in a data-parallel run every rank's ``x`` together
        (so the statistics, part of the checkpoint, stay identical on all ranks)."""
        dp = self._context.data_parallel
        stats.update(x, sum_over_ranks=None if dp is None else dp.sum_over_ranks)
