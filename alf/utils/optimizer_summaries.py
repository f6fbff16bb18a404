"""The optimizer's TensorBoard tags, written by ``Algorithm.update_with_gradient`` on
summary iterations only (``RunContext.should_summarize``):

- ``Optimizer/<Algorithm name>/<k>/learning_rate``: the learning rate set for this update
  (the schedule's value), for the ``k``-th optimizer in ``_all_optimizer_entries`` order
  (child algorithms' first, then the algorithm's own, in the order they were added);
- ``Optimizer/<Algorithm name>/<k>/grad_norm``: the global L2 norm of that optimizer's
  gradients before clipping, whether or not clipping is on.

One point per summarised iteration (``RunContext.add_iteration_scalar``): the last
learning rate of the iteration and the mean gradient norm over its updates.
"""
from typing import Any, Optional, Sequence

import torch


def grad_norm(params: Sequence[torch.Tensor]) -> Optional[torch.Tensor]:
    """The global L2 norm of the gradients of ``params`` (None if none has one), computed
    as :func:`alf.utils.fast_optim.clip_grad_norm_` computes it (so the two agree)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return None
    if any(g.is_sparse for g in grads) or len({(g.device, g.dtype) for g in grads}) > 1:
        return torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g.detach().to_dense().float()) for g in grads]))
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))


def summarize_optimizer(context: Any, prefix: str, lr: float, params: Sequence[torch.Tensor],
                        norm_before_clipping: Optional[torch.Tensor]) -> None:
    """Write ``Optimizer/<prefix>/learning_rate`` and ``.../grad_norm`` (see the module
    docstring); ``prefix`` is ``<Algorithm name>/<k>``. ``norm_before_clipping``: the norm
    clipping returned, or None to compute it here (clipping off)."""
    norm = norm_before_clipping if norm_before_clipping is not None else grad_norm(params)
    context.add_iteration_scalar(f"Optimizer/{prefix}/learning_rate", float(lr), reduce="last")
    if norm is not None:
        context.add_iteration_scalar(f"Optimizer/{prefix}/grad_norm", norm.detach())
