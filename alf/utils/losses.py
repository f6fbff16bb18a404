"""Element-wise losses shared by algorithms (no reduction: callers average/mask)."""
import torch


def element_wise_squared_loss(target: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    """``(target - pred) ** 2``."""
    return (target - pred) ** 2


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over entries where ``mask`` is nonzero (0 if none)."""
    if mask.dtype != x.dtype:
        mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def normalize_for_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Zero masked-out entries and rescale so that ``result.mean() == masked_mean(loss, mask)``.

    Lets a loss carry its validity mask through ``update_with_gradient``'s plain mean.
    """
    if mask.dtype != loss.dtype:
        mask = mask.to(loss.dtype)
    return loss * (mask * (mask.numel() / mask.sum().clamp(min=1.0)))
