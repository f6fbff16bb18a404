"""IMPALA: V-trace actor-critic (Espeholt et al. 2018).

The same regime and preprocessing as :class:`APPOAlgorithm` (whole-buffer
training, V-trace ``vs`` and policy-gradient advantages computed once per
iteration by the current networks over the ``[B, T+1]`` buffer, the last step
being the bootstrap), with the plain actor-critic loss of the paper instead of
PPO's clipped surrogate::

    loss = -pg_advantage * log pi(a|x) + td_loss_weight * 0.5 * (vs - V(x))^2
           - entropy_regularization * H(pi(.|x))

``pg_advantage = min(rho_bar_pg, pi/mu) * (r + gamma * d * vs' - V)`` already
carries the clipped importance weight, so no ratio appears in the loss. One
gradient step per iteration over the whole buffer
(``TrainerConfig.num_updates_per_train_iter=1``, ``mini_batch_size=None``) is
the paper's learner; more passes make later steps slightly off-policy, which
V-trace does not see (it was computed before the first step).
"""
from typing import Any, Callable, NamedTuple

import torch

import alf
from alf.algorithms.appo_algorithm import APPOAlgorithm
from alf.config_ranges import NonNegative
from alf.data_structures import LossInfo, StepType
from alf.utils.losses import element_wise_squared_loss, masked_mean, normalize_for_mean
from alf.utils.defaults import with_defaults


class ImpalaLossInfo(NamedTuple):
    pg_loss: Any = ()
    td_loss: Any = ()
    neg_entropy: Any = ()


@alf.configurable
class ImpalaLoss:
    """IMPALA's loss on ``[T, B]`` train infos (:class:`PPOTrainInfo` fields).

    Args:
        entropy_regularization: weight of the entropy bonus (the paper's entropy cost, 0.01).
        td_loss_weight: weight of the value loss ``0.5 * td_error_loss_fn(vs, V)``
            (the paper's baseline cost, 0.5).
        normalize_advantages: standardise the V-trace advantages within each batch
            (off in the paper).
        td_error_loss_fn: element-wise ``fn(target, pred)``.
    """

    def __init__(self, entropy_regularization: NonNegative = 0.01,
                 td_loss_weight: NonNegative = 0.5,
                 normalize_advantages: bool = False,
                 td_error_loss_fn: Callable = element_wise_squared_loss):
        self.entropy_regularization = entropy_regularization
        self.td_loss_weight = td_loss_weight
        self.normalize_advantages = normalize_advantages
        self.td_error_loss_fn = td_error_loss_fn

    def __call__(self, info, progress: float = 0.0, with_summaries: bool = True) -> LossInfo:
        """``info`` fields ``[T, B]``: step_type, log_prob (with gradient), value (with
        gradient), advantages, returns, entropy (``()`` allowed when its weight is 0);
        value and returns ``[T, B, k]`` with reward columns (their value losses summed,
        each where ``value_mask [T, B, k]`` says it trains).
        ``progress`` is unused (same call as :class:`PPOLoss`). LAST steps are masked."""
        valid = (info.step_type != StepType.LAST).to(info.advantages.dtype)
        adv = info.advantages
        if self.normalize_advantages:
            n = valid.sum()
            mean = (adv * valid).sum() / n.clamp(min=1)
            var = (((adv - mean) ** 2) * valid).sum() / (n - 1).clamp(min=1)
            adv = (adv - mean) / (var.sqrt() + 1e-8)
        pg_loss = -adv.detach() * info.log_prob
        td_loss = 0.5 * self.td_error_loss_fn(info.returns.detach(), info.value)
        columns = td_loss.dim() > pg_loss.dim()  # one value per reward column [T, B, k]
        if columns:  # each column where it trains (value_mask), then their sum
            td_loss = (td_loss * info.value_mask.to(td_loss.dtype)).sum(-1)
            loss = pg_loss
        else:
            loss = pg_loss + self.td_loss_weight * td_loss
        has_entropy = isinstance(info.entropy, torch.Tensor)
        neg_entropy = -info.entropy if has_entropy else torch.zeros_like(loss)
        if self.entropy_regularization != 0:
            loss = loss + self.entropy_regularization * neg_entropy
        loss = normalize_for_mean(loss, valid)
        if columns:  # a non-episodic column's value also trains at LAST steps
            loss = loss + self.td_loss_weight * td_loss * (valid.numel() /
                                                            valid.sum().clamp(min=1.0))
        if not with_summaries:
            return LossInfo(loss=loss)
        with torch.no_grad():
            extra = ImpalaLossInfo(pg_loss=masked_mean(pg_loss, valid),
                                   td_loss=masked_mean(td_loss, valid),
                                   neg_entropy=masked_mean(neg_entropy, valid))
        return LossInfo(loss=loss, extra=extra)


@alf.configurable
class ImpalaAlgorithm(APPOAlgorithm):
    """V-trace actor-critic (IMPALA).

    Args: as :class:`APPOAlgorithm`; ``loss_ctor`` defaults to :class:`ImpalaLoss`.
    """

    supports_async_unroll = True

    __init__ = with_defaults(APPOAlgorithm.__init__, loss_ctor=ImpalaLoss, name="ImpalaAlgorithm")
