"""PPO's clipped-surrogate loss (Schulman et al. 2017), with optional value clipping."""
from typing import Any, Callable, NamedTuple, Optional

import torch

import alf
from alf.config_ranges import FiniteNonNegative, NonNegative, Positive, PositiveSchedule
from alf.data_structures import LossInfo, StepType
from alf.utils.losses import element_wise_squared_loss, masked_mean, normalize_for_mean
from alf.utils.schedules import as_schedule


class PPOLossInfo(NamedTuple):
    pg_loss: Any = ()
    td_loss: Any = ()
    neg_entropy: Any = ()
    clip_fraction: Any = ()
    approx_kl: Any = ()
    importance_ratio: Any = ()
    clip_range: Any = ()  # epsilon used by this update (a schedule's value)


@alf.configurable
class PPOLoss:
    """Clipped surrogate + value loss + entropy bonus on ``[T, B]`` train infos.

    Args:
        importance_ratio_clipping: epsilon (number or schedule of training progress).
        normalize_advantages: standardise advantages within each mini-batch (as SB3/CleanRL).
        entropy_regularization: weight of the entropy bonus.
        td_loss_weight: value-loss weight, SB3's ``vf_coef`` (loss = weight * (return - value)^2).
        value_clipping: if set, clip the value change to +-value_clipping (PPO2 style).
        td_error_loss_fn: element-wise ``fn(target, pred)``.
    """

    def __init__(self, importance_ratio_clipping: PositiveSchedule = 0.2,
                 normalize_advantages: bool = True, entropy_regularization: FiniteNonNegative = 0.0,
                 td_loss_weight: FiniteNonNegative = 0.5, value_clipping: Optional[Positive] = None,
                 td_error_loss_fn: Callable = element_wise_squared_loss):
        self.clip_schedule = as_schedule(importance_ratio_clipping)
        self.normalize_advantages = normalize_advantages
        self.entropy_regularization = entropy_regularization
        self.td_loss_weight = td_loss_weight
        self.value_clipping = value_clipping
        self.td_error_loss_fn = td_error_loss_fn

    def __call__(self, info, progress: float, with_summaries: bool = True) -> LossInfo:
        """``info`` fields ``[T, B]``: step_type, log_prob, old_log_prob, value, old_value,
        advantages, returns, entropy (``()`` allowed when ``entropy_regularization`` is 0);
        value, old_value and returns are ``[T, B, k]`` with reward columns (the value
        losses of the columns are summed, each where ``value_mask [T, B, k]`` says it
        trains: a non-episodic column also at LAST steps).
        ``with_summaries=False`` skips the diagnostic statistics in ``LossInfo.extra``
        (they cost ~10% of a small network's update)."""
        valid = (info.step_type != StepType.LAST).to(info.advantages.dtype)
        adv = info.advantages
        if self.normalize_advantages:
            # unbiased std over the valid entries of this mini-batch (as SB3 / CleanRL)
            n = valid.sum()
            mean = (adv * valid).sum() / n.clamp(min=1)
            var = (((adv - mean) ** 2) * valid).sum() / (n - 1).clamp(min=1)
            adv = (adv - mean) / (var.sqrt() + 1e-8)
        eps = self.clip_schedule(progress)
        log_ratio = info.log_prob - info.old_log_prob
        ratio = torch.exp(log_ratio)
        pg_loss = -torch.min(ratio * adv, ratio.clamp(1.0 - eps, 1.0 + eps) * adv)
        td_loss = self.td_error_loss_fn(info.returns, info.value)
        if self.value_clipping is not None:
            clipped = info.old_value + (info.value - info.old_value).clamp(
                -self.value_clipping, self.value_clipping)
            td_loss = torch.max(td_loss, self.td_error_loss_fn(info.returns, clipped))
        columns = td_loss.dim() > pg_loss.dim()  # one value per reward column [T, B, k]
        if columns:  # each column where it trains (value_mask), then their sum
            td_loss = (td_loss * info.value_mask.to(td_loss.dtype)).sum(-1)
            loss = pg_loss
        else:
            loss = pg_loss + self.td_loss_weight * td_loss
        has_entropy = isinstance(info.entropy, torch.Tensor)
        neg_entropy = -info.entropy if has_entropy else torch.zeros_like(loss)
        if self.entropy_regularization != 0:  # a zero-weight term would still cost a backward pass
            loss = loss + self.entropy_regularization * neg_entropy
        loss = normalize_for_mean(loss, valid)
        if columns:  # a non-episodic column's value also trains at LAST steps
            loss = loss + self.td_loss_weight * td_loss * (valid.numel() /
                                                            valid.sum().clamp(min=1.0))
        if not with_summaries:
            return LossInfo(loss=loss)
        with torch.no_grad():
            extra = PPOLossInfo(
                pg_loss=masked_mean(pg_loss, valid), td_loss=masked_mean(td_loss, valid),
                neg_entropy=masked_mean(neg_entropy, valid),
                clip_fraction=masked_mean(((ratio - 1).abs() > eps).float(), valid),
                approx_kl=masked_mean((ratio - 1) - log_ratio, valid),
                importance_ratio=masked_mean(ratio, valid), clip_range=float(eps))
        return LossInfo(loss=loss, extra=extra)
