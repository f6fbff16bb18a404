"""A self-predictive representation: the encoder is shaped by predicting its own next
latent, as an :class:`~alf.algorithms.agent.Agent` representation learner.

An encoder ``phi`` maps an observation to features ``z = phi(s)`` (what the RL
algorithm sees). A dynamics model ``g(z_prev, a_prev)`` predicts the latent of the
next observation, and the loss is the cosine distance to that latent as a slowly
moving *target* encoder ``phi_bar`` (an exponential moving average of ``phi``,
no gradient) embeds it:

    loss = 2 - 2 cos(g(phi(s_prev), a_prev), phi_bar(s))

This is the latent self-prediction of SPR (Schwarzer et al. 2021, "Data-Efficient
Reinforcement Learning with Self-Predictive Representations", one step, without
augmentation or projection heads) and the "ZP" objective analysed by Ni et al. 2024
("Bridging State and History Representations: Understanding Self-Predictive RL"),
where an EMA target (or stop-gradient) is what keeps the latent from collapsing to a
constant. The gradient reaches ``phi`` through ``z_prev`` only.

With ``recurrent=True`` the encoder is an LSTM over the observation history (``z_t =
phi(s_1..t)``, the history representation Ni et al. 2024 study under partial
observability): the loss is the same per transition of a sequence, both encoders
running over the sequence from the state stored with its first step (the target
encoder starts from the online encoder's stored state: the state of the EMA copy is
not stored).
"""
from typing import Any, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

import alf
from alf.algorithms.representation_learner import RepresentationLearner
from alf.errors import ConfigError
from alf.data_structures import StepType
from alf.networks import EncodingNetwork, LSTMEncodingNetwork
from alf.tensor_specs import TensorSpec
from alf.utils.action_features import ActionFeatures
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils.target_update import TargetUpdater, make_target


@alf.configurable
class LatentDynamicsLearner(RepresentationLearner):
    """An encoder trained to predict its next latent (module docstring).

    Args:
        observation_spec, action_spec, optimizer, context, debug_summaries, name: see
            :class:`RepresentationLearner`. The observation is any nest
            :class:`~alf.networks.EncodingNetwork` takes (vectors, an image with
            ``conv_layer_params``); the action one discrete scalar or one continuous
            vector.
        fc_layer_params, conv_layer_params: the encoder's hidden layers.
        feature_size: ``F``, the size of the features the RL algorithm receives.
        dynamics_fc_layer_params: hidden layers of the dynamics model ``g``.
        target_tau: the target encoder moves ``tau`` of the way to the encoder after
            each update (SPR: 0.01; 1 would copy it, a plain stop-gradient).
        recurrent: the encoder is an LSTM of ``feature_size`` units after the
            ``fc_layer_params`` layers (features of the history; trained on sequences of
            ``TrainerConfig.mini_batch_length`` >= 2 steps).
    """

    uses_previous_step = True

    def __init__(self, observation_spec: Any, action_spec: Any,
                 fc_layer_params: Sequence[int] = (64,),
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 feature_size: int = 64,
                 dynamics_fc_layer_params: Sequence[int] = (64,),
                 target_tau: float = 0.01,
                 recurrent: bool = False,
                 optimizer: Optional[OptimizerFactory] = None,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "LatentDynamicsLearner"):
        super().__init__(observation_spec, action_spec, optimizer=optimizer, context=context,
                         debug_summaries=debug_summaries, name=name)
        if not 0.0 < target_tau <= 1.0:
            raise ConfigError(f"{name}.target_tau = {target_tau} is out of range: it must be "
                              "in (0, 1]")
        self._actions = ActionFeatures(action_spec, name)
        # tanh (an LSTM's h too) keeps the features the RL networks see bounded
        if recurrent:
            self.encoder = LSTMEncodingNetwork(
                observation_spec, hidden_size=feature_size, pre_fc_layer_params=fc_layer_params,
                activation=torch.relu, conv_layer_params=conv_layer_params,
                name="LatentLSTMEncoder")
        else:
            self.encoder = EncodingNetwork(
                observation_spec, conv_layer_params=conv_layer_params,
                fc_layer_params=fc_layer_params, activation=torch.relu,
                last_layer_size=feature_size, last_activation=torch.tanh,
                name="LatentEncoder")
        self._dynamics = EncodingNetwork(
            TensorSpec((feature_size + self._actions.size,)),
            fc_layer_params=dynamics_fc_layer_params, activation=torch.relu,
            last_layer_size=feature_size, input_preprocessors=None,
            preprocessing_combiner=None, name="LatentDynamics")
        self._target_encoder = make_target(self.encoder)
        self._update_target = TargetUpdater(self.encoder, self._target_encoder, tau=target_tau)
        for training_only in (self._dynamics, self._target_encoder):
            self.exclude_from_rollout(training_only)

    def predicted_next_latent(self, prev_observation: Any,
                              prev_action: torch.Tensor) -> torch.Tensor:
        """``[N, F]``: ``g(phi(s_prev), a_prev)``."""
        z_prev = self.encode(prev_observation)
        return self._dynamics(torch.cat([z_prev, self._actions(prev_action)], -1))[0]

    def loss(self, prev_observation: Any, prev_action: torch.Tensor,
             observation: Any) -> torch.Tensor:
        """``[N]`` cosine distance ``2 - 2 cos`` (in [0, 4]) between the predicted latent
        and the target encoder's latent of ``observation``."""
        predicted = self.predicted_next_latent(prev_observation, prev_action)
        with torch.no_grad():
            target = self._target_encoder(observation)[0]
        return 2.0 - 2.0 * F.cosine_similarity(predicted, target, dim=-1, eps=1e-6)

    def sequence_loss(self, observation: Any, prev_action: torch.Tensor,
                      step_type: torch.Tensor, initial_state: Any
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Recurrent: ``(loss [B, L - 1], valid [B, L - 1])``, the cosine distance between
        ``g(z_{t-1}, a_{t-1})`` and the target encoder's ``z_t`` over sequences
        ``[B, L]`` (see :meth:`RepresentationLearner.sequence_loss`)."""
        B, L = step_type.shape[:2]
        z = self.encode_sequence(observation, step_type, initial_state)
        with torch.no_grad():
            target = self.encode_sequence(observation, step_type, initial_state,
                                          encoder=self._target_encoder)
        n = B * (L - 1)
        action = prev_action[:, 1:].reshape((n,) + tuple(prev_action.shape[2:]))
        predicted = self._dynamics(torch.cat([z[:, :-1].reshape(n, -1),
                                              self._actions(action)], -1))[0]
        loss = 2.0 - 2.0 * F.cosine_similarity(predicted, target[:, 1:].reshape(n, -1),
                                               dim=-1, eps=1e-6)
        return loss.reshape(B, L - 1), step_type[:, 1:] != StepType.FIRST

    def after_update_step(self) -> None:
        """The target encoder moves ``target_tau`` towards the encoder."""
        self._update_target()
