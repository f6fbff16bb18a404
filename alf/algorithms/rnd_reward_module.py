"""Random Network Distillation (Burda et al. 2018, "Exploration by Random Network
Distillation", arXiv:1810.12894) as an :class:`~alf.algorithms.agent.Agent` reward module.

A fixed, randomly initialised *target* network ``f`` embeds each observation; a
*predictor* ``f_hat`` is trained to match it. Observations seen often are predicted
well, so the prediction error ``||f_hat(s) - f(s)||^2`` is an exploration bonus that
fades as a state becomes familiar. As in the paper, observations (vectors) are
whitened by running statistics and clipped to [-5, 5] before both networks, and the
bonus is divided by a running standard deviation so that its scale does not drift
(the paper divides by that of the bonus's discounted return; this module by that of
the bonus itself, since the Agent folds it into the reward before any return is
computed).
"""
from typing import Any, Optional, Sequence

import torch

import alf
from alf.algorithms.reward_module import RewardModule
from alf.errors import ConfigError
from alf.networks import EncodingNetwork
from alf.tensor_specs import TensorSpec
from alf.utils.normalizers import RunningMeanVar
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


@alf.configurable
class RNDRewardModule(RewardModule):
    """RND's novelty bonus of arriving at an observation.

    Args:
        observation_spec, action_spec, optimizer, context, debug_summaries, name: see
            :class:`RewardModule`. The observation must be one tensor: a vector, or an
            image ``[C, H, W]`` with ``conv_layer_params``.
        fc_layer_params: hidden layers of the target and the predictor.
        conv_layer_params: ``(channels, kernel, stride)`` per conv layer, for images.
        feature_size: size of the embedding the predictor learns to match.
        normalize_observations: whiten vector observations by their running mean and
            variance and clip to [-5, 5] (the paper's setting; images are scaled to
            [0, 1] by the networks instead).
        normalize_reward: divide the bonus by its running standard deviation.
        gamma, episodic: the intrinsic column's discount and episodic flag where the RL
            algorithm learns a value per column: the paper's 0.99, non-episodic
            (sec. 2.3: the intrinsic return flows across episode ends).
    """

    uses_previous_step = False

    def __init__(self, observation_spec: Any, action_spec: Any,
                 fc_layer_params: Sequence[int] = (64, 64),
                 conv_layer_params: Optional[Sequence[tuple]] = None,
                 feature_size: int = 64, normalize_observations: bool = True,
                 normalize_reward: bool = True,
                 optimizer: Optional[OptimizerFactory] = None,
                 gamma: Optional[float] = 0.99, episodic: bool = False,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "RNDRewardModule"):
        super().__init__(observation_spec, action_spec, optimizer=optimizer, gamma=gamma,
                         episodic=episodic, context=context,
                         debug_summaries=debug_summaries, name=name)
        if not isinstance(observation_spec, TensorSpec):
            raise ConfigError(f"{name}: the observation must be one tensor (a vector, or an "
                              f"image with conv_layer_params), got {observation_spec!r}")

        def network(net_name: str) -> EncodingNetwork:
            return EncodingNetwork(observation_spec, conv_layer_params=conv_layer_params,
                                   fc_layer_params=fc_layer_params, activation=torch.relu,
                                   last_layer_size=feature_size, name=net_name)

        self._predictor = network("RNDPredictor")
        self._target = network("RNDTarget")
        for p in self._target.parameters():
            p.requires_grad_(False)  # random and fixed: no optimizer takes it
        vector = observation_spec.dtype.is_floating_point and len(observation_spec.shape) == 1
        self._obs_stats = (RunningMeanVar(observation_spec.shape)
                           if normalize_observations and vector else None)
        if normalize_reward:
            self.normalize_reward_by_std()

    def _input(self, observation: torch.Tensor) -> torch.Tensor:
        if self._obs_stats is None:
            return observation
        return self._obs_stats.normalize(observation, clip=5.0)

    def _error(self, observation: torch.Tensor) -> torch.Tensor:
        """``[N]`` mean squared error of the predictor against the target."""
        x = self._input(observation)
        with torch.no_grad():
            target = self._target(x)[0]
        return (self._predictor(x)[0] - target).pow(2).mean(-1)

    @torch.no_grad()
    def reward(self, prev_observation: Any, prev_action: Any,
               observation: torch.Tensor) -> torch.Tensor:
        """``[N]`` novelty of ``observation``: the prediction error, over its running
        standard deviation when ``normalize_reward``."""
        return self.scaled(self._error(observation))

    def loss(self, prev_observation: Any, prev_action: Any,
             observation: torch.Tensor) -> torch.Tensor:
        """``[N]`` the predictor's error (the target is fixed); folds the batch into the
        observation statistics first."""
        if self._obs_stats is not None:
            self.fold_statistics(self._obs_stats, observation)
        return self._error(observation)
