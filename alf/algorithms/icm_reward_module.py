"""Intrinsic Curiosity Module (Pathak et al. 2017, "Curiosity-driven Exploration by
Self-supervised Prediction", arXiv:1705.05363) as an :class:`~alf.algorithms.agent.Agent`
reward module.

An encoder ``phi`` embeds observations; an *inverse* model predicts the action taken
between two observations from ``(phi(s_prev), phi(s))``, which shapes ``phi`` to keep
what the agent can affect; a *forward* model predicts ``phi(s)`` from
``(phi(s_prev), a_prev)``. The bonus is the forward model's error
``reward_scale / 2 * ||forward(phi(s_prev), a_prev) - phi(s)||^2``: transitions whose
outcome the agent cannot yet predict. The loss is the paper's
``(1 - beta) * inverse + beta * forward`` (beta = 0.2 there); the forward loss does not
move ``phi(s)``, its target.
"""
from typing import Any, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

import alf
from alf.algorithms.reward_module import RewardModule
from alf.errors import ConfigError
from alf.networks import EncodingNetwork
from alf.tensor_specs import TensorSpec
from alf.utils.action_features import ActionFeatures
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


@alf.configurable
class ICMRewardModule(RewardModule):
    """ICM's curiosity bonus of a transition ``(s_prev, a_prev) -> s``.

    Args:
        observation_spec, action_spec, optimizer, context, debug_summaries, name: see
            :class:`RewardModule`. The observation must be one tensor (a vector, or an
            image with ``conv_layer_params``); the action one discrete scalar or one
            continuous vector.
        fc_layer_params, conv_layer_params: the encoder's hidden layers.
        feature_size: size of ``phi``.
        hidden_size: hidden width of the forward and inverse models.
        beta: weight of the forward loss against the inverse loss (the paper's 0.2).
        reward_scale: the paper's ``eta``.
        normalize_reward: divide the bonus by its running standard deviation.
        gamma, episodic: see :class:`RewardModule` (default: the RL algorithm's discount,
            episodic).
    """

    uses_previous_step = True

    def __init__(self, observation_spec: Any, action_spec: Any,
                 fc_layer_params: Sequence[int] = (64,),
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 feature_size: int = 64, hidden_size: int = 64, beta: float = 0.2,
                 reward_scale: float = 1.0, normalize_reward: bool = False,
                 optimizer: Optional[OptimizerFactory] = None,
                 gamma: Optional[float] = None, episodic: bool = True,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "ICMRewardModule"):
        super().__init__(observation_spec, action_spec, optimizer=optimizer, gamma=gamma,
                         episodic=episodic, context=context,
                         debug_summaries=debug_summaries, name=name)
        if not isinstance(observation_spec, TensorSpec):
            raise ConfigError(f"{name}: the observation must be one tensor, got "
                              f"{observation_spec!r}")
        if not 0.0 <= beta <= 1.0:
            raise ConfigError(f"{name}.beta = {beta} is out of range: it must be in [0, 1]")
        self._actions = ActionFeatures(action_spec, name)
        action_size = self._actions.size
        self._encoder = EncodingNetwork(observation_spec, conv_layer_params=conv_layer_params,
                                        fc_layer_params=fc_layer_params, activation=torch.relu,
                                        last_layer_size=feature_size, name="ICMEncoder")
        self._forward_model = _mlp(feature_size + action_size, hidden_size, feature_size)
        self._inverse_model = _mlp(2 * feature_size, hidden_size, action_size)
        self._beta = float(beta)
        self._reward_scale = float(reward_scale)
        if normalize_reward:
            self.normalize_reward_by_std()

    def _forward_error(self, phi_prev: torch.Tensor, prev_action: torch.Tensor,
                       phi: torch.Tensor) -> torch.Tensor:
        """``[N]``: ``1/2 ||forward(phi_prev, a) - phi||^2`` with ``phi`` as a fixed target."""
        predicted = self._forward_model(torch.cat([phi_prev, self._actions(prev_action)],
                                                  -1))
        return 0.5 * (predicted - phi.detach()).pow(2).sum(-1)

    @torch.no_grad()
    def reward(self, prev_observation: torch.Tensor, prev_action: torch.Tensor,
               observation: torch.Tensor) -> torch.Tensor:
        """``[N]`` curiosity of each transition (over its running std when
        ``normalize_reward``)."""
        return self.scaled(self._reward_scale * self._forward_error(
            self._encoder(prev_observation)[0], prev_action, self._encoder(observation)[0]))

    def loss(self, prev_observation: torch.Tensor, prev_action: torch.Tensor,
             observation: torch.Tensor) -> torch.Tensor:
        """``[N]``: ``(1 - beta) * inverse + beta * forward``."""
        phi_prev = self._encoder(prev_observation)[0]
        phi = self._encoder(observation)[0]
        predicted = self._inverse_model(torch.cat([phi_prev, phi], -1))
        if self._actions.discrete:
            inverse = F.cross_entropy(predicted, self._actions.index(prev_action),
                                      reduction="none")
        else:
            inverse = (predicted - self._actions(prev_action)).pow(2).mean(-1)
        forward = self._forward_error(phi_prev, prev_action, phi)
        return (1.0 - self._beta) * inverse + self._beta * forward
