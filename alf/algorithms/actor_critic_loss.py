"""A2C loss: policy gradient with GAE/TD(lambda) advantages, value regression, entropy bonus."""
from typing import Any, Callable, NamedTuple

import torch

import alf
from alf.config_ranges import Discount, FiniteNonNegative, NonNegative, UnitInterval
from alf.data_structures import LossInfo, StepType
from alf.utils import value_ops
from alf.utils.losses import element_wise_squared_loss, masked_mean, normalize_for_mean


class ActorCriticLossInfo(NamedTuple):
    pg_loss: Any = ()
    td_loss: Any = ()
    neg_entropy: Any = ()


@alf.configurable
class ActorCriticLoss:
    """Computes the A2C loss from time-major ``[T, B]`` rollout infos.

    The last step of the unroll only provides the bootstrap value, so losses are
    ``[T-1, B]``; transitions that cross an episode boundary (step ``t`` is LAST)
    are masked out.

    Args:
        gamma: discount.
        td_lambda: GAE / TD(lambda) parameter (1 = Monte Carlo, 0 = one-step TD).
        use_gae: advantages by GAE; otherwise ``returns - values`` with discounted returns.
        normalize_advantages: standardise advantages over the batch.
        entropy_regularization: weight of the entropy bonus.
        td_loss_weight: weight of the value loss.
        td_error_loss_fn: element-wise value loss ``fn(target, pred)``.
    """

    def __init__(self, gamma: Discount = 0.99, td_lambda: UnitInterval = 0.95, use_gae: bool = True,
                 normalize_advantages: bool = False,
                 entropy_regularization: FiniteNonNegative = 0.0,
                 td_loss_weight: FiniteNonNegative = 0.5,
                 td_error_loss_fn: Callable = element_wise_squared_loss):
        self.gamma = gamma
        self.td_lambda = td_lambda
        self.use_gae = use_gae
        self.normalize_advantages = normalize_advantages
        self.entropy_regularization = entropy_regularization
        self.td_loss_weight = td_loss_weight
        self.td_error_loss_fn = td_error_loss_fn

    def advantages_and_returns(self, reward, value, step_type, discount):
        """``[T, B]`` inputs -> (advantages ``[T-1, B]``, returns ``[T-1, B]``)."""
        if self.use_gae:
            adv = value_ops.generalized_advantage_estimation(
                rewards=reward, values=value, step_types=step_type, discounts=discount,
                gamma=self.gamma, td_lambda=self.td_lambda)
            return adv, adv + value[:-1]
        ret = value_ops.discounted_return(rewards=reward, values=value, step_types=step_type,
                                          discounts=discount, gamma=self.gamma)
        return ret - value[:-1], ret

    def __call__(self, info) -> LossInfo:
        """``info`` fields (``[T, B]``): reward, step_type, discount, value, log_prob, entropy."""
        value = info.value
        adv, returns = self.advantages_and_returns(info.reward, value.detach(), info.step_type,
                                                   info.discount)
        valid = info.step_type[:-1] != StepType.LAST
        if self.normalize_advantages:
            m = valid.to(adv.dtype)
            mean = (adv * m).sum() / m.sum().clamp(min=1)
            var = ((adv - mean) ** 2 * m).sum() / m.sum().clamp(min=1)
            adv = (adv - mean) / (var.sqrt() + 1e-8)
        pg_loss = -adv.detach() * info.log_prob[:-1]
        td_loss = self.td_error_loss_fn(returns.detach(), value[:-1])
        neg_entropy = -info.entropy[:-1]
        loss = pg_loss + self.td_loss_weight * td_loss + self.entropy_regularization * neg_entropy
        # summaries average over the valid transitions only, as the optimised loss does
        with torch.no_grad():
            extra = ActorCriticLossInfo(pg_loss=masked_mean(pg_loss, valid),
                                        td_loss=masked_mean(td_loss, valid),
                                        neg_entropy=masked_mean(neg_entropy, valid))
        return LossInfo(loss=normalize_for_mean(loss, valid), extra=extra)
