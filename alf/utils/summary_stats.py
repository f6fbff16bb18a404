"""Diagnostic statistics for TensorBoard, computed only when summaries are due.

What a researcher reads first when a run misbehaves: how much of the return's
variance the value function explains, and the spread of values, returns,
advantages, Q-values and their targets. Algorithms keep the tensors they already
compute (in their train infos or the preprocessed experience) and reduce them here
in ``summarize_train``, so an iteration that writes no summaries pays nothing; the
statistics of one call are read from the device in one transfer.

Tags (docs/quickstart.md, "TensorBoard"): ``Loss/<Algorithm>/explained_variance``
and ``Value/<Algorithm>/<name>_{mean,std,min,max}``.
"""
import math
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

#: the statistics written for each tensor, in this order
STATS = ("mean", "std", "min", "max")


def summaries_due(context: Any, step: Optional[int]) -> bool:
    """Whether ``summarize_train(..., step)`` writes: ``step`` given (the caller decided,
    per gradient step) or the run context says the iteration is summarised."""
    return step is not None or context.should_summarize()


def _weights(x: torch.Tensor, mask: Optional[torch.Tensor]) -> Tuple[torch.Tensor,
                                                                      torch.Tensor]:
    """``(x, w)`` as float32 (a bf16 value would round its statistics), ``w`` 1 where
    ``mask`` (the shape of ``x``, or of its leading dims) holds, broadcast to ``x``.
    Weights rather than boolean indexing: indexing would make the host wait for the
    device to learn the result's size."""
    x = x.detach().float()
    if mask is None:
        return x, torch.ones_like(x)
    w = mask.detach().to(torch.float32)
    while w.dim() < x.dim():
        w = w.unsqueeze(-1)
    return x, w.expand_as(x)


def _mean_var(x: torch.Tensor, w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor,
                                                          torch.Tensor]:
    """``(n, mean, population variance)`` of the entries of ``x`` weighted by ``w``
    (NaN mean and variance when ``n`` is 0)."""
    n = w.sum()
    mean = (x * w).sum() / n
    return n, mean, ((x - mean).square() * w).sum() / n


def explained_variance(prediction: torch.Tensor, target: torch.Tensor,
                       mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``1 - Var[target - prediction] / Var[target]`` over the entries where ``mask``
    holds (all if None): 1 for a perfect value function, 0 for one no better than the
    mean return, negative for a worse one (SB3's ``train/explained_variance``). NaN when
    ``target`` has no variance (or no entry), where it is undefined.

    Args:
        prediction: the values ``V(s)``, any shape.
        target: the returns they regress on, the shape of ``prediction``.
        mask: where both count (e.g. not at LAST steps), the shape of ``prediction``
            or of its leading dims.
    Returns:
        a scalar float32 tensor on their device (population variances, as numpy's
        ``var``), computed without waiting for the device.
    """
    y, w = _weights(target, mask)
    _, _, var_y = _mean_var(y, w)
    _, _, var_diff = _mean_var(y - prediction.detach().float(), w)
    return torch.where(var_y > 0, 1.0 - var_diff / var_y, torch.full_like(var_y, math.nan))


def tensor_stats(x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``[4]``: mean, standard deviation (population), min and max of the entries of
    ``x`` where ``mask`` holds (NaN for all four when there is none); computed without
    waiting for the device."""
    x, w = _weights(x, mask)
    n, mean, var = _mean_var(x, w)
    keep = w > 0
    lo = torch.where(keep, x, torch.full_like(x, math.inf)).min()
    hi = torch.where(keep, x, torch.full_like(x, -math.inf)).max()
    stats = torch.stack([mean, var.sqrt(), lo, hi])
    return torch.where(n > 0, stats, torch.full_like(stats, math.nan))


class ScalarBatch:
    """Scalars of one summary, gathered as device tensors (or Python numbers) and read
    from the device in one transfer."""

    def __init__(self) -> None:
        self._tags: List[str] = []
        self._values: List[Union[torch.Tensor, float]] = []

    def add(self, tag: str, value: Union[torch.Tensor, float]) -> None:
        """One scalar under ``tag``: a one-element tensor or a Python number."""
        self._tags.append(tag)
        self._values.append(value.detach().float().reshape(())
                            if isinstance(value, torch.Tensor) else float(value))

    def add_stats(self, prefix: str, x: torch.Tensor, mask: Optional[torch.Tensor] = None,
                  suffix: str = "") -> None:
        """``<prefix>_mean<suffix>``, ``_std``, ``_min``, ``_max`` of ``x`` (see
        :func:`tensor_stats`)."""
        for name, value in zip(STATS, tensor_stats(x, mask).unbind()):
            self.add(f"{prefix}_{name}{suffix}", value)

    def write(self, context: Any, step: Optional[int] = None) -> Dict[str, float]:
        """Write every scalar (``context.add_scalar``, against ``step`` when given) and
        return them by tag."""
        tensors = [v for v in self._values if isinstance(v, torch.Tensor)]
        read = iter(torch.stack(tensors).tolist() if tensors else [])
        values = [next(read) if isinstance(v, torch.Tensor) else v for v in self._values]
        for tag, value in zip(self._tags, values):
            context.add_scalar(tag, value, step)
        return dict(zip(self._tags, values))


def column_views(value: torch.Tensor, returns: torch.Tensor,
                 valid: torch.Tensor) -> List[Tuple[str, torch.Tensor, torch.Tensor]]:
    """``[(suffix, value, returns)]``: one view per reward column ``_<i>`` when ``value``
    has a column dimension beyond ``valid``'s (``[..., k]``: PPO, APPO and IMPALA
    composed with reward modules), else the tensors themselves with no suffix."""
    if value.dim() == valid.dim():
        return [("", value, returns)]
    return [(f"_{i}", value[..., i], returns[..., i]) for i in range(value.shape[-1])]


def add_value_summaries(batch: ScalarBatch, name: str, value: torch.Tensor,
                        returns: torch.Tensor, advantages: torch.Tensor,
                        valid: torch.Tensor) -> None:
    """An actor-critic's value diagnostics into ``batch``: per reward column (see
    :func:`column_views`) ``Loss/<name>/explained_variance`` of ``returns`` by ``value``
    and ``Value/<name>/value_*``, ``return_*``; then ``Value/<name>/advantage_*`` (the
    advantages before any normalisation in the loss).

    Args:
        value, returns: ``[..]`` or ``[.., k]`` with reward columns.
        advantages: ``[..]``, the shape of ``valid``.
        valid: where the statistics count (not at LAST steps, whose targets are not
            trained on).
    """
    for suffix, v, r in column_views(value, returns, valid):
        batch.add(f"Loss/{name}/explained_variance{suffix}", explained_variance(v, r, valid))
        batch.add_stats(f"Value/{name}/value", v, valid, suffix)
        batch.add_stats(f"Value/{name}/return", r, valid, suffix)
    batch.add_stats(f"Value/{name}/advantage", advantages, valid)


def add_q_summaries(batch: ScalarBatch, name: str, q_value: torch.Tensor,
                    target_q: torch.Tensor, valid: Any = ()) -> None:
    """A Q-learner's ``Value/<name>/q_*`` and ``Value/<name>/target_q_*`` over the rows
    of ``valid [B]`` (all rows when it is ``()``): ``q_value [B]`` (the mean over a
    critic ensemble) and the TD target ``target_q [B]`` it regresses on."""
    mask = valid if isinstance(valid, torch.Tensor) else None
    batch.add_stats(f"Value/{name}/q", q_value, mask)
    batch.add_stats(f"Value/{name}/target_q", target_q, mask)
