"""PPO the ALF way: unroll into a buffer, compute GAE once over the whole buffer,
then ``num_updates_per_train_iter`` epochs of shuffled mini-batches, then clear.

The newest step of each env is kept across clears (it is the bootstrap step
of this iteration and the first step of the next), so every transition is
trained on exactly once per epoch, as in SB3/CleanRL.
"""
from typing import Any, Callable, NamedTuple, Optional, Tuple

import torch

import alf
from alf import nest as alf_nest
from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm, ActorCriticState
from alf.algorithms.ppo_loss import PPOLoss
from alf.algorithms.reward_columns import RewardColumns
from alf.config_ranges import Discount, UnitInterval
from alf.data_structures import AlgStep, Experience, LossInfo, StepType, TimeStep
from alf.example_catalog import configured_env_name, suggest_examples
from alf.errors import ConfigError
from alf.networks import ActorDistributionNetwork, ValueNetwork
from alf.tensor_specs import TensorSpec
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext
from alf.utils import dist_utils, value_ops


class PPORolloutInfo(NamedTuple):
    """Stored per step ``[B]``: what the behaviour policy computed."""
    log_prob: Any = ()
    value: Any = ()
    advantages: Any = ()  # ``()`` in the buffer; filled by preprocess_experience
    returns: Any = ()


class PPOTrainInfo(NamedTuple):
    step_type: Any = ()
    log_prob: Any = ()
    old_log_prob: Any = ()
    value: Any = ()
    old_value: Any = ()
    advantages: Any = ()
    returns: Any = ()
    entropy: Any = ()
    #: with reward columns: ``[.., k]`` where each column's value trains
    #: (:meth:`RewardColumns.value_mask`); ``()`` otherwise
    value_mask: Any = ()


@alf.configurable
class PPOAlgorithm(ActorCriticAlgorithm):
    """Proximal Policy Optimization with clipped surrogate objective.

    Args: as :class:`ActorCriticAlgorithm` (including ``encoding_network_ctor``, one
    encoder shared by the policy and value heads, e.g. ``@NatureCnnEncoder``), plus
        gamma: discount factor of the returns and advantages.
        gae_lambda: GAE's lambda (Schulman et al. 2016), computed over the whole buffer:
            0 = one-step TD advantages, 1 = Monte-Carlo returns minus the value.
        loss_ctor: defaults to :class:`PPOLoss`.

    PPO assumes its samples come from the current policy, so it refuses
    ``TrainerConfig.async_unroll=True`` (policy lag); :class:`APPOAlgorithm` is
    PPO's loss with the V-trace correction that makes async unrolls valid.
    """

    on_policy = False
    whole_replay_buffer_training = True
    clear_replay_buffer = True
    #: False: the advantages assume fresh samples; subclasses with an off-policy
    #: correction (APPO, IMPALA) set it to True.
    supports_async_unroll = False
    supports_reward_columns = True

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorDistributionNetwork,
                 value_network_ctor: Callable = ValueNetwork,
                 encoding_network_ctor: Optional[Callable] = None,
                 gamma: Discount = 0.99, gae_lambda: UnitInterval = 0.95,
                 loss_ctor: Callable = PPOLoss,
                 context: Optional[RunContext] = None,
                 optimizer: Optional[OptimizerFactory] = None, debug_summaries: bool = False,
                 name: str = "PPOAlgorithm", is_eval: bool = False):
        super().__init__(observation_spec, action_spec, reward_spec,
                         actor_network_ctor=actor_network_ctor,
                         value_network_ctor=value_network_ctor,
                         encoding_network_ctor=encoding_network_ctor, loss_ctor=loss_ctor,
                         context=context, optimizer=optimizer,
                         debug_summaries=debug_summaries, name=name, is_eval=is_eval)
        self._gamma = gamma
        self._gae_lambda = gae_lambda
        shape = tuple(getattr(reward_spec, "shape", ()))
        # reward_spec [k]: one value per column (reward_columns.py); None for a scalar
        self.reward_columns = RewardColumns(shape[0], gamma) if shape else None

    def check_training_config(self, config: Any) -> None:
        """PPO's advantages are computed over each whole unroll, from fresh samples."""
        if config.async_unroll and not self.supports_async_unroll:
            raise ConfigError(
                f"{type(self).__name__} trains on its own fresh samples; with TrainerConfig."
                "async_unroll=True the samples come from an older policy: use APPOAlgorithm "
                "(PPO's loss with V-trace correction), e.g. "
                + suggest_examples("APPOAlgorithm", configured_env_name()))
        super().check_training_config(config)
        if config.whole_replay_buffer_training is False:
            raise ConfigError("PPOAlgorithm needs TrainerConfig.whole_replay_buffer_training=True "
                              "(or unset): advantages are computed over the whole unroll")
        if config.mini_batch_length > max(1, int(config.unroll_length)):
            raise ConfigError(f"PPOAlgorithm: TrainerConfig.mini_batch_length "
                              f"({config.mini_batch_length}) exceeds unroll_length "
                              f"({config.unroll_length}), the steps per env trained on each iteration")

    def rollout_step(self, time_step: TimeStep, state: ActorCriticState) -> AlgStep:
        dist, value, new_state = self._policy(time_step.observation, state)
        action = dist_utils.sample_action(dist)
        info = PPORolloutInfo(log_prob=dist_utils.compute_log_probability(dist, action),
                              value=value)
        return AlgStep(output=action, state=new_state, info=info)

    def preprocess_experience(self, experience: Experience) -> Experience:
        """``[B, T]`` buffer -> ``[B, T-1]`` with GAE advantages and returns filled in."""
        ts, info = experience.time_step, experience.rollout_info
        value_t = info.value.transpose(0, 1)
        step_types, discounts, gamma = ts.step_type, ts.discount, self._gamma
        if self.reward_columns is not None:  # [B, T, k]: per column (reward_columns.py)
            step_types, discounts = self.reward_columns.per_column(step_types, discounts)
            gamma = self.reward_columns.gammas.to(value_t.dtype)
        adv = value_ops.generalized_advantage_estimation(
            rewards=ts.reward.transpose(0, 1), values=value_t,
            step_types=step_types.transpose(0, 1), discounts=discounts.transpose(0, 1),
            gamma=gamma, td_lambda=self._gae_lambda)  # [T-1, B] ([T-1, B, k])
        returns = adv + value_t[:-1]
        if self.reward_columns is not None:
            adv = self.reward_columns.combine(adv)
        exp = alf_nest.map_structure(lambda x: x[:, :-1], experience)
        return exp._replace(rollout_info=exp.rollout_info._replace(
            advantages=adv.transpose(0, 1), returns=returns.transpose(0, 1)))

    def train_step(self, experience: Experience, state: ActorCriticState,
                   rollout_info: PPORolloutInfo) -> AlgStep:
        dist, value, new_state = self._policy(experience.time_step.observation, state)
        info = PPOTrainInfo(step_type=experience.time_step.step_type,
                            log_prob=dist_utils.compute_log_probability(dist, experience.action),
                            old_log_prob=rollout_info.log_prob, value=value,
                            old_value=rollout_info.value, advantages=rollout_info.advantages,
                            returns=rollout_info.returns,
                            entropy=dist_utils.compute_entropy(dist) if self._need_entropy() else (),
                            value_mask=() if self.reward_columns is None else
                            self.reward_columns.value_mask(experience.time_step.step_type))
        return AlgStep(output=(), state=new_state, info=info)

    def _need_entropy(self) -> bool:
        """Entropy is needed for the loss (nonzero weight) or for summaries."""
        return (getattr(self._loss, "entropy_regularization", 1.0) != 0
                or self._context.should_summarize())

    def calc_loss(self, info: PPOTrainInfo) -> LossInfo:
        return self._loss(info, self._context.progress(),
                          with_summaries=self._context.should_summarize())

    def _value_targets(self, experience: Experience, info: Any) -> Tuple[torch.Tensor, ...]:
        """The whole preprocessed buffer ``[B, T-1]``: the values the advantages were
        computed with (APPO, IMPALA: the current ones), their targets (GAE returns;
        V-trace ``vs``) and the advantages, before the loss normalises them
        (``value``, ``returns`` ``[B, T-1, k]`` with reward columns)."""
        ri = experience.rollout_info
        return (ri.value, ri.returns, ri.advantages,
                experience.time_step.step_type != StepType.LAST)
