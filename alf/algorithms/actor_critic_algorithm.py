"""A2C: on-policy actor-critic trained on each fresh unroll (with gradients).

With ``encoding_network_ctor`` the actor and the value network share one
encoder (as SB3's ``CnnPolicy``): ``observation -> encoder -> features [B, F]``
feeds both heads, the encoder runs once per step, and the gradients of the
policy and the value losses both train it. Example (Atari)::

    PPOAlgorithm.encoding_network_ctor = @NatureCnnEncoder
    ActorDistributionNetwork.fc_layer_params = ()   # linear policy head, gain 0.01
    ValueNetwork.fc_layer_params = ()               # linear value head, gain 1
"""
from typing import Any, Callable, NamedTuple, Optional, Tuple

import torch

import alf
from alf import nest as alf_nest
from alf.algorithms.actor_critic_loss import ActorCriticLoss
from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.data_structures import AlgStep, LossInfo, StepType, TimeStep
from alf.errors import ConfigError
from alf.networks import ActorDistributionNetwork, ValueNetwork
from alf.networks.encoding_networks import check_feature_encoder
from alf.tensor_specs import TensorSpec
from alf.utils import dist_utils
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils.summary_stats import ScalarBatch, add_value_summaries, summaries_due


class ActorCriticState(NamedTuple):
    actor: Any = ()
    value: Any = ()


class ActorCriticInfo(NamedTuple):
    """Per-step rollout info, ``[B]`` each (``[T, B]`` once stacked)."""
    step_type: Any = ()
    reward: Any = ()
    discount: Any = ()
    value: Any = ()
    log_prob: Any = ()
    entropy: Any = ()


@alf.configurable
class ActorCriticAlgorithm(RLAlgorithm):
    """Advantage actor-critic (A2C).

    Args:
        observation_spec, action_spec, reward_spec, context: see RLAlgorithm.
        actor_network_ctor: ``ctor(input_spec=, action_spec=)`` -> network returning a distribution.
        value_network_ctor: ``ctor(input_spec=)`` -> network returning ``[B]`` values.
        encoding_network_ctor: optional ``ctor(input_spec=observation_spec)`` -> a
            stateless encoder (e.g. ``NatureCnnEncoder``) shared by the actor and the
            value network, which are then built on its ``[F]`` output spec (heads;
            they may still be recurrent). None: each network encodes the observation.
        loss_ctor: builds the loss object (``ActorCriticLoss`` by default).
        optimizer: optimizer factory for all parameters.
        is_eval: build for evaluation only: no value network, no optimizer;
            ``rollout_step`` then raises (it needs the value); a training checkpoint
            loads into it (:func:`alf.experiment.checkpoint_state_for`,
            docs/design/eval_builds.md).
    """

    on_policy = True
    trains_on_behaviour_log_probs = True
    #: a vector ``reward_spec [k]`` gets one value per column (alf/algorithms/
    #: reward_columns.py): PPO, APPO and IMPALA; A2C's loss takes a scalar reward
    supports_reward_columns = False

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorDistributionNetwork,
                 value_network_ctor: Callable = ValueNetwork,
                 encoding_network_ctor: Optional[Callable] = None,
                 loss_ctor: Callable = ActorCriticLoss, context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, debug_summaries: bool = False,
                 name: str = "ActorCriticAlgorithm", is_eval: bool = False):
        encoder, head_input_spec = None, observation_spec
        if encoding_network_ctor is not None:
            encoder = encoding_network_ctor(input_spec=observation_spec)
            head_input_spec = check_feature_encoder(name, encoder)
        actor_network = actor_network_ctor(input_spec=head_input_spec, action_spec=action_spec)
        columns = _reward_columns(name, reward_spec, self.supports_reward_columns)
        value_kwargs = {} if columns is None else {"output_size": columns}
        # is_eval: predict_step reads the encoder and the actor only (docs/design/eval_builds.md)
        value_network = None if is_eval else value_network_ctor(input_spec=head_input_spec,
                                                                **value_kwargs)
        state_spec = ActorCriticState(actor=actor_network.state_spec,
                                      value=() if is_eval else value_network.state_spec)
        super().__init__(observation_spec, action_spec, reward_spec, context=context,
                         optimizer=None if is_eval else optimizer,
                         train_state_spec=state_spec,
                         debug_summaries=debug_summaries, name=name)
        self._encoder = encoder  # None, or a registered sub-module (before the heads)
        self._actor_network = actor_network
        self._value_network = value_network
        self._loss = loss_ctor()
        if is_eval:
            self.eval_omitted = ("_value_network",)

    def check_training_config(self, config: Any) -> None:
        super().check_training_config(config)
        if self.on_policy and config.unroll_length < 2:
            raise ConfigError(f"{type(self).__name__} is on-policy and needs TrainerConfig."
                              f"unroll_length >= 2 (the last step of an unroll only provides the "
                              f"bootstrap value), got {config.unroll_length}")

    def _encode(self, observation):
        """Shared features ``[B, F]`` (the observation itself without a shared encoder)."""
        if self._encoder is None:
            return observation
        return self._encoder(observation)[0]

    def _policy(self, observation, state: ActorCriticState):
        """``observation [B, ...]`` -> (distribution ``[B]``, value ``[B]``, new state)."""
        if self._value_network is None:
            raise RuntimeError(f"{self._name} was built with is_eval=True (no value network): "
                               "it has predict_step only; build it with role='learner' (or "
                               "'actor') to roll out or train")
        x = self._encode(observation)
        dist, actor_state = self._actor_network(x, state=state.actor)
        value, value_state = self._value_network(x, state=state.value)
        return dist, value, ActorCriticState(actor=actor_state, value=value_state)

    def predict_step(self, time_step: TimeStep, state: ActorCriticState) -> AlgStep:
        x = self._encode(time_step.observation)
        dist, actor_state = self._actor_network(x, state=state.actor)
        return AlgStep(output=dist_utils.get_mode(dist), state=state._replace(actor=actor_state))

    def rollout_step(self, time_step: TimeStep, state: ActorCriticState) -> AlgStep:
        dist, value, new_state = self._policy(time_step.observation, state)
        action = dist_utils.sample_action(dist)
        info = ActorCriticInfo(step_type=time_step.step_type, reward=time_step.reward,
                               discount=time_step.discount, value=value,
                               log_prob=dist_utils.compute_log_probability(dist, _detach(action)),
                               entropy=dist_utils.compute_entropy(dist))
        return AlgStep(output=_detach(action), state=new_state, info=info)

    def calc_loss(self, info: ActorCriticInfo) -> LossInfo:
        return self._loss(info)

    def summarize_train(self, experience: Any, info: Any, loss_info: LossInfo,
                        step: Optional[int] = None) -> None:
        """The loss terms, then (when summaries are due, so other iterations pay nothing)
        the value diagnostics: ``Loss/<name>/explained_variance`` and
        ``Value/<name>/{value,return,advantage}_{mean,std,min,max}`` of the iteration's
        data (:func:`alf.utils.summary_stats.add_value_summaries`)."""
        super().summarize_train(experience, info, loss_info, step)
        if not summaries_due(self._context, step):
            return
        targets = self._value_targets(experience, info)
        if targets is None:
            return
        batch = ScalarBatch()
        add_value_summaries(batch, self._name, *targets)
        batch.write(self._context, step)

    def _value_targets(self, experience: Any, info: Any) -> Optional[Tuple[torch.Tensor, ...]]:
        """``(value, returns, advantages, valid)`` of the data an iteration trained on,
        for the summaries (None: this loss has none). A2C: from the unroll's rollout
        infos ``[T, B]`` by the loss's own advantage estimator, ``[T-1, B]`` each."""
        estimate = getattr(self._loss, "advantages_and_returns", None)
        if estimate is None or not isinstance(getattr(info, "value", None), torch.Tensor):
            return None
        with torch.no_grad():
            value = info.value.detach()
            adv, returns = estimate(info.reward, value, info.step_type, info.discount)
        return value[:-1], returns, adv, info.step_type[:-1] != StepType.LAST


def _detach(action: Any) -> Any:
    """``action.detach()``; each leaf's for an action nest (MultiDiscrete is one tensor)."""
    if isinstance(action, torch.Tensor):
        return action.detach()
    return alf_nest.map_structure(torch.Tensor.detach, action)


def _reward_columns(name: str, reward_spec: Any, supported: bool) -> Optional[int]:
    """``k`` for a vector ``reward_spec [k]`` (one value per column), None for a scalar."""
    shape = tuple(getattr(reward_spec, "shape", ()))
    if shape == ():
        return None
    if len(shape) != 1 or not supported:
        raise ConfigError(f"{name}: reward_spec {reward_spec!r} is not supported: "
                          + ("one value per reward column needs a vector reward [k]"
                             if supported else "it learns from a scalar reward (PPOAlgorithm, "
                             "APPOAlgorithm and ImpalaAlgorithm take reward columns); an "
                             "Agent weighs an env's columns into one: TrainerConfig."
                             f"algorithm_ctor = @Agent, Agent.rl_algorithm_cls = @{name}, "
                             "Agent.reward_weights = [...] (one per column)"))
    return int(shape[0])
