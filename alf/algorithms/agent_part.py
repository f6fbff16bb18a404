"""``AgentPart``: what every sub-algorithm of an :class:`~alf.algorithms.agent.Agent`
shares (reward modules, representation learners; docs/design/agent.md).

A part is an ordinary :class:`~alf.algorithms.algorithm.Algorithm` with the env's
specs, its own training loss on transitions ``(prev_observation, prev_action,
observation)`` ``[N]`` taken from stored experience, and one gradient step of that loss
per trained batch, with its own optimizer, that is not counted in
``context.num_updates`` (the RL algorithm's clock). A part without trainable parameters
(a count-based bonus: its state is buffers) needs neither an optimizer nor a loss: it
does not train (:attr:`AgentPart.trains`). Whether a part has what it needs is
:meth:`AgentPart.check_training_setup`, which the Agent calls on each part it builds
(once the whole constructor has run: a subclass builds its networks after the base
constructor): a part with trainable parameters and no optimizer, or no :meth:`loss`, is
one error naming the gin line or the method to add. Every step of a part that trains
summarises its loss as ``Loss/<name>/loss`` (one point per summarised iteration).
"""
from typing import Any, Optional

import torch

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.errors import ConfigError
from alf.utils.normalizers import RunningMeanVar
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class AgentPart(Algorithm):
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
            trains with its own); None for a part without trainable parameters.
        context, debug_summaries, name: see :class:`Algorithm`.
    """

    uses_previous_step: bool = True
    optimizer_example = ("part", "1e-4")

    def __init__(self, observation_spec: Any, action_spec: Any,
                 optimizer: Optional[OptimizerFactory] = None,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "AgentPart"):
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

    @property
    def trains(self) -> bool:
        """Whether :meth:`update` takes gradient steps: the part has trainable parameters
        (False: a part whose state is buffers, e.g. counts; nothing to optimize)."""
        return any(p.requires_grad for p in self.parameters())

    def check_training_setup(self) -> None:
        """Called by whoever builds the part (the Agent, for each reward module and its
        representation learner), once the constructor has run: a part with trainable
        parameters needs an optimizer and a :meth:`loss` (one :class:`ConfigError` naming
        what to add); a part without them needs neither."""
        if not self.trains:
            return
        name = self.name
        if self._default_optimizer_factory is None and not self._extra_optimizer_factories:
            scope, lr = self.optimizer_example
            raise ConfigError(f"{name} trains with its own optimizer: set {name}.optimizer, "
                              f"e.g. `{name}.optimizer = @{scope}/alf.optimizers.Adam()` and "
                              f"`{scope}/alf.optimizers.Adam.lr = {lr}`")
        if type(self).loss is AgentPart.loss:
            raise ConfigError(f"{name} has trainable parameters but no loss: implement "
                              f"{type(self).__name__}.loss(prev_observation, prev_action, "
                              "observation) -> [N] (or make them buffers / requires_grad=False)")

    def loss(self, prev_observation: Any, prev_action: Any,
             observation: Any) -> torch.Tensor:
        """The part's own training loss per transition ``[N]``; a part with trainable
        parameters implements it (one without has nothing to train)."""
        raise NotImplementedError(f"{self.name} has no loss")

    def update(self, prev_observation: Any, prev_action: Any, observation: Any,
               valid: torch.Tensor, keep_existing_grads: bool = False) -> Optional[LossInfo]:
        """One gradient step of :meth:`loss` over the ``valid [N]`` transitions, on this
        part's parameters; not counted in ``context.num_updates``. None (and nothing
        done) for a part that does not train (:attr:`trains`).

        Args:
            keep_existing_grads: add to the gradients already on the parameters (the
                RL loss's, for a shared encoder) instead of replacing them.
        """
        if not self.trains:
            return None
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
