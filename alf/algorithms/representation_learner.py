"""``RepresentationLearner``: the representation role of an :class:`~alf.algorithms.agent.Agent`.

A representation learner is an ordinary :class:`~alf.algorithms.algorithm.Algorithm`
(its own networks, optimizer, checkpoint entries under ``_representation.`` and
summaries under its name) that owns an *encoder*. The Agent asks it three things
(docs/design/agent.md):

- :meth:`RepresentationLearner.encode`: observations ``[N, ...]`` -> features
  ``[N, F]`` (:attr:`output_spec`), which the RL algorithm receives as its
  observation, when acting and when training;
- :meth:`RepresentationLearner.loss`: its own training loss per transition
  ``(prev_observation, prev_action, observation)`` ``[N]``, taken from stored
  experience on the learner;
- :meth:`RepresentationLearner.update`: one gradient step of that loss.

*Shared* (``Agent.encoder_trained_by_rl=True``): the RL loss's gradient also reaches
the encoder, and this learner's optimizer steps the encoder on the sum of both
gradients. *Separate*: the RL algorithm sees the features as fixed inputs; only
this learner's loss trains the encoder.

Actors run :meth:`encode`, so the encoder is part of ``rollout_state_dict``; a
subclass hands the parts only training reads (predictors, target encoders) to
:meth:`~alf.algorithms.algorithm.Algorithm.exclude_from_rollout`.

A new learner is a subclass that sets ``self.encoder`` (a network whose first output
is ``[N, F]``) and implements :meth:`loss`.
"""
from typing import Any, Optional

import torch

from alf.algorithms.agent_part import AgentPart
from alf.tensor_specs import TensorSpec
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


class RepresentationLearner(AgentPart):
    """Base class of representation learners.

    Class attribute:
        uses_previous_step: whether :meth:`loss` reads ``prev_observation`` (a
            dynamics model does; an objective on single observations does not and can
            also train on single-step mini-batches, where it is None).

    Args:
        observation_spec: the (transformed) observation spec of one step.
        action_spec: the env's action spec.
        optimizer: optimizer factory for the learner's parameters, the encoder's
            included (each part of an Agent trains with its own).
        context, debug_summaries, name: see :class:`Algorithm`.
    """

    uses_previous_step: bool = True
    optimizer_example = ("repr", "3e-4")

    def __init__(self, observation_spec: Any, action_spec: Any,
                 optimizer: Optional[OptimizerFactory] = None,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "RepresentationLearner"):
        super().__init__(observation_spec, action_spec, optimizer=optimizer, context=context,
                         debug_summaries=debug_summaries, name=name)
        self.encoder: Optional[torch.nn.Module] = None  # set by the subclass

    @property
    def output_spec(self) -> TensorSpec:
        """``TensorSpec([F])`` of :meth:`encode`'s output: the RL algorithm's observation."""
        return self.encoder.output_spec

    def encode(self, observation: Any) -> torch.Tensor:
        """``[N, ...]`` observations -> ``[N, F]`` features (with gradient into the encoder
        when autograd is on)."""
        return self.encoder(observation)[0]

    def clear_grads(self) -> None:
        """Drop every gradient on this learner's parameters (before the RL step of a
        shared encoder, so that only this batch's gradients are summed)."""
        for p in self.parameters():
            p.grad = None
