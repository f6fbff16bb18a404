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

*Recurrent* learners (an encoder with a state, e.g.
:class:`~alf.networks.LSTMEncodingNetwork`: features of the history, not of one
observation) have a non-empty :attr:`state_spec`. The Agent then carries the encoder's
state in its own (``AgentState.representation``), so it is reset at episode starts
like any policy state and stored with each step; a trained batch ``[B, L]`` is encoded
by :meth:`encode_sequence` from its first step's stored state (truncated
back-propagation through the ``L`` steps), and the learner trains by
:meth:`sequence_loss` (which a recurrent subclass implements) on the same sequence.
"""
from typing import Any, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.algorithms.agent_part import AgentPart
from alf.data_structures import LossInfo, StepType
from alf.tensor_specs import TensorSpec
from alf.utils.tensor_utils import reset_state_if_necessary
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
        when autograd is on); a feed-forward encoder's (see :meth:`encode_step`)."""
        return self.encoder(observation)[0]

    @property
    def state_spec(self) -> Any:
        """The encoder's state for one env (``()`` for a feed-forward encoder)."""
        return getattr(self.encoder, "state_spec", ())

    @property
    def is_recurrent(self) -> bool:
        return not alf_nest.is_empty(self.state_spec)

    def get_initial_state(self, batch_size: int) -> Any:
        """Zeros of :attr:`state_spec` ``[batch_size, ...]``: an episode's start."""
        return self.encoder.get_initial_state(batch_size) if self.is_recurrent else ()

    def encode_step(self, observation: Any, state: Any) -> Tuple[torch.Tensor, Any]:
        """One step: observations ``[N, ...]`` and the encoder's state before them ->
        ``(features [N, F], state after them)`` (the state stays ``()`` when
        feed-forward). The caller resets the state at episode starts."""
        if not self.is_recurrent:
            return self.encode(observation), state
        return self.encoder(observation, state)

    def encode_sequence(self, observation: Any, step_type: torch.Tensor, initial_state: Any,
                        encoder: Optional[torch.nn.Module] = None) -> torch.Tensor:
        """Observations ``[B, L, ...]`` -> features ``[B, L, F]``: a recurrent encoder
        (``encoder``, default this learner's; e.g. a target copy of it) runs from
        ``initial_state [B, ...]`` (the state stored with each sequence's first step),
        restarting from zeros where ``step_type [B, L]`` is ``FIRST``; a feed-forward one
        encodes all ``B * L`` observations at once."""
        B, L = step_type.shape[:2]
        if not self.is_recurrent:
            flat = alf_nest.map_structure(lambda x: x.reshape((B * L,) + tuple(x.shape[2:])),
                                          observation)
            # this learner's encode (a subclass may override it), as when acting
            features = self.encode(flat) if encoder is None else encoder(flat)[0]
            return features.reshape(B, L, -1)
        encoder = self.encoder if encoder is None else encoder
        zeros = self.get_initial_state(B)
        state, features = initial_state, []
        for t in range(L):
            state = reset_state_if_necessary(state, zeros, step_type[:, t] == StepType.FIRST)
            z, state = encoder(alf_nest.map_structure(lambda x: x[:, t], observation), state)
            features.append(z)
        return torch.stack(features, dim=1)

    def sequence_loss(self, observation: Any, prev_action: Any, step_type: torch.Tensor,
                      initial_state: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """The learner's own loss on sequences ``[B, L]`` (a recurrent encoder starts
        from the stored state ``initial_state [B, ...]`` of their first step): ``(loss
        [B, L - 1], valid [B, L - 1])`` for the transitions ``t - 1 -> t``; ``valid`` is
        False where step ``t`` starts an episode.

        This default is :meth:`loss` on each transition, which is right for a
        feed-forward encoder; a recurrent learner overrides it (the Agent refuses one
        that does not, at construction), since :meth:`loss` sees single observations."""
        B, L = step_type.shape[:2]

        def flat(x: torch.Tensor) -> torch.Tensor:
            return x.reshape((B * (L - 1),) + tuple(x.shape[2:]))
        prev_obs = alf_nest.map_structure(lambda x: flat(x[:, :-1]), observation)
        obs = alf_nest.map_structure(lambda x: flat(x[:, 1:]), observation)
        action = alf_nest.map_structure(lambda x: flat(x[:, 1:]), prev_action)
        loss = self.loss(prev_obs, action, obs).reshape(B, L - 1)
        return loss, step_type[:, 1:] != StepType.FIRST

    def update_on_sequence(self, observation: Any, prev_action: Any, step_type: torch.Tensor,
                           initial_state: Any, keep_existing_grads: bool = False) -> LossInfo:
        """One gradient step of :meth:`sequence_loss` (a recurrent learner's
        :meth:`update`)."""
        loss, valid = self.sequence_loss(observation, prev_action, step_type, initial_state)
        info = self.update_with_gradient(LossInfo(loss=loss), valid_masks=valid.to(loss.dtype),
                                         count_update=False,
                                         keep_existing_grads=keep_existing_grads)
        self.after_update_step()
        self.summarize_update(info)
        return info

    def clear_grads(self) -> None:
        """Drop every gradient on this learner's parameters (before the RL step of a
        shared encoder, so that only this batch's gradients are summed)."""
        for p in self.parameters():
            p.grad = None
