"""Return and advantage estimators over time-major unrolls.

Conventions (ALF's), for ``[T, B]`` tensors (``rewards``/``values`` may carry
extra trailing dims, e.g. ``[T, B, k]`` for multi-dimensional rewards):

- ``rewards[t]`` is the reward received on *arriving* at step ``t``
  (0 at ``FIRST``).
- ``discounts[t]`` is 0 if step ``t`` terminated the episode and 1 otherwise
  (mid-episode and truncation alike).
- A transition is ``t -> t+1``. It crosses an episode boundary iff
  ``step_types[t] == LAST``: step ``t+1`` is the ``FIRST`` of a new episode and
  nothing flows back across it. At such ``t`` every estimator here returns
  ``values[t]`` as the return (advantage 0); the loss at LAST steps should be
  masked by the caller anyway.
- Truncation (time limit) is ``step_types[t+1] == LAST`` with
  ``discounts[t+1] == 1``: ``values[t+1]`` is the value of the real final
  observation, so bootstrapping from it is correct. Termination has
  ``discounts[t+1] == 0`` and nothing is bootstrapped.

Every function returns ``T - 1`` rows (the last step has no next step) and is
computed without gradient: returns and advantages are targets.

``gamma`` / ``td_lambda`` may be python floats or tensors broadcastable to
``rewards.shape[1:]`` (e.g. a per-environment ``[B]`` discount).

The backward recursions are written as ``x[t] = a[t] + c[t] * x[t + 1]`` with
``a``/``c`` precomputed for all ``t`` at once, so the python loop over ``T``
issues one fused kernel (``addcmul`` into a preallocated row) per step.
"""
from typing import NamedTuple, Optional, Union

import torch

from alf.data_structures import StepType

Scalar = Union[float, torch.Tensor]


def _expand_as(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Append singleton dims to ``x`` (``[T, B]``) so it broadcasts with ``target`` (``[T, B, ...]``)."""
    return x.reshape(x.shape + (1,) * (target.ndim - x.ndim))


def _prepare(rewards, values, step_types, discounts, time_major):
    """Time-major views plus float ``is_last``/``discounts`` shaped like ``values``."""
    if not time_major:
        rewards, values = rewards.transpose(0, 1), values.transpose(0, 1)
        step_types, discounts = step_types.transpose(0, 1), discounts.transpose(0, 1)
    if rewards.shape != values.shape:
        raise ValueError(f"rewards {tuple(rewards.shape)} and values {tuple(values.shape)} differ")
    if rewards.shape[0] < 2:
        raise ValueError(f"need at least 2 time steps, got shape {tuple(rewards.shape)}")
    dtype = values.dtype
    is_last = _expand_as((step_types == StepType.LAST).to(dtype), values)
    discounts = _expand_as(discounts.to(dtype), values)
    return rewards.to(dtype), values, is_last, discounts


def _backward_recursion(a: torch.Tensor, c: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """Solve ``x[t] = a[t] + c[t] * x[t + 1]`` backwards with ``x[T'] = last``.

    ``a``, ``c``: ``[T', B, ...]``; ``last``: ``[B, ...]``. Returns ``x`` ``[T', B, ...]``.
    """
    n = a.shape[0]
    out = torch.empty((n + 1,) + tuple(a.shape[1:]), dtype=a.dtype, device=a.device)
    out[n] = last
    for t in range(n - 1, -1, -1):
        torch.addcmul(a[t], c[t], out[t + 1], out=out[t])
    return out[:n]


def _out_major(x: torch.Tensor, time_major: bool) -> torch.Tensor:
    return x if time_major else x.transpose(0, 1)


def discounted_return(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
                      discounts: torch.Tensor, gamma: Scalar = 0.99,
                      time_major: bool = True) -> torch.Tensor:
    """Monte-Carlo returns of the first ``T - 1`` steps, bootstrapped at the end.

    ``G[t] = r[t+1] + gamma * d[t+1] * G[t+1]`` with ``G[T-1] = values[T-1]``;
    ``G[t] = values[t]`` where ``step_types[t] == LAST`` (so a truncated
    episode bootstraps from the value of its final observation, a terminated
    one does not because ``d`` is 0).

    Args:
        rewards, values: ``[T, B, ...]`` (``[B, T, ...]`` if not ``time_major``).
        step_types, discounts: ``[T, B]`` (or ``[B, T]``).
        gamma: discount factor, float or tensor broadcastable to ``rewards.shape[1:]``.
    Returns:
        ``[T - 1, B, ...]`` (or ``[B, T - 1, ...]``) returns, no gradient.
    """
    with torch.no_grad():
        rewards, values, is_last, discounts = _prepare(rewards, values, step_types, discounts,
                                                       time_major)
        last = is_last[:-1].bool()
        a = torch.where(last, values[:-1], rewards[1:])
        c = (1 - is_last[:-1]) * gamma * discounts[1:]
        return _out_major(_backward_recursion(a, c, values[-1]), time_major)


def one_step_discounted_return(rewards: torch.Tensor, values: torch.Tensor,
                               step_types: torch.Tensor, discounts: torch.Tensor,
                               gamma: Scalar = 0.99, time_major: bool = True) -> torch.Tensor:
    """One-step TD targets ``r[t+1] + gamma * d[t+1] * values[t+1]`` (``values[t]`` at LAST).

    Shapes as :func:`discounted_return`; returns ``[T - 1, B, ...]``, no gradient.
    """
    with torch.no_grad():
        rewards, values, is_last, discounts = _prepare(rewards, values, step_types, discounts,
                                                       time_major)
        target = rewards[1:] + gamma * discounts[1:] * values[1:]
        return _out_major(torch.where(is_last[:-1].bool(), values[:-1], target), time_major)


def generalized_advantage_estimation(rewards: torch.Tensor, values: torch.Tensor,
                                     step_types: torch.Tensor, discounts: torch.Tensor,
                                     gamma: Scalar = 0.99, td_lambda: Scalar = 0.95,
                                     time_major: bool = True) -> torch.Tensor:
    """GAE(lambda) advantages (Schulman et al. 2016) of the first ``T - 1`` steps.

    ``delta[t] = r[t+1] + gamma * d[t+1] * V[t+1] - V[t]`` and
    ``A[t] = delta[t] + gamma * lambda * d[t+1] * A[t+1]`` with ``A[T-1] = 0``;
    both are cut (``A[t] = 0``) where ``step_types[t] == LAST``.
    ``td_lambda = 1`` gives ``discounted_return - values[:-1]``;
    ``td_lambda = 0`` gives the one-step TD error.

    Shapes as :func:`discounted_return`; returns ``[T - 1, B, ...]``, no gradient.
    """
    with torch.no_grad():
        rewards, values, is_last, discounts = _prepare(rewards, values, step_types, discounts,
                                                       time_major)
        not_last = 1 - is_last[:-1]
        gd = gamma * discounts[1:]
        a = not_last * (rewards[1:] + gd * values[1:] - values[:-1])
        c = not_last * td_lambda * gd
        advs = _backward_recursion(a, c, torch.zeros_like(values[-1]))
        return _out_major(advs, time_major)


def td_lambda_return(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
                     discounts: torch.Tensor, gamma: Scalar = 0.99, td_lambda: Scalar = 0.95,
                     time_major: bool = True) -> torch.Tensor:
    """TD(lambda) returns: :func:`generalized_advantage_estimation` ``+ values[:-1]``.

    Shapes as :func:`discounted_return`; returns ``[T - 1, B, ...]``, no gradient.
    """
    advs = generalized_advantage_estimation(rewards, values, step_types, discounts, gamma,
                                            td_lambda, time_major)
    with torch.no_grad():
        return advs + (values[:-1] if time_major else values[:, :-1])


class VTraceReturns(NamedTuple):
    """Result of :func:`vtrace`: ``vs`` value targets and ``pg_advantages``, both ``[T - 1, B, ...]``."""
    vs: torch.Tensor
    pg_advantages: torch.Tensor


def vtrace(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
           discounts: torch.Tensor, log_rhos: torch.Tensor, gamma: Scalar = 0.99,
           td_lambda: Scalar = 1.0, clip_rho_threshold: Optional[float] = 1.0,
           clip_c_threshold: Optional[float] = 1.0,
           clip_pg_rho_threshold: Optional[float] = 1.0,
           time_major: bool = True) -> VTraceReturns:
    """V-trace off-policy targets and advantages (Espeholt et al. 2018, IMPALA).

    ``log_rhos[t] = log pi(a_t | x_t) - log mu(a_t | x_t)`` for the action taken
    at step ``t`` (``[T, B]``; its last row is unused). With
    ``rho_t = min(rho_bar, exp(log_rhos[t]))``, ``c_t = lambda * min(c_bar, exp(log_rhos[t]))``:

    - ``delta[t] = rho_t * (r[t+1] + gamma * d[t+1] * V[t+1] - V[t])``
    - ``vs[t] - V[t] = delta[t] + gamma * d[t+1] * c_t * (vs[t+1] - V[t+1])``, ``vs[T-1] = V[T-1]``
    - ``pg_advantages[t] = rho^pg_t * (r[t+1] + gamma * d[t+1] * vs[t+1] - V[t])``

    All are cut at ``step_types[t] == LAST`` (``vs[t] = V[t]``, advantage 0).
    A threshold of ``None`` means no clipping. On-policy (``log_rhos == 0``),
    ``vs`` equals :func:`td_lambda_return` and, for ``td_lambda = 1``,
    ``pg_advantages`` equals GAE(1).

    Shapes as :func:`discounted_return`; returns :class:`VTraceReturns`, no gradient.
    """
    with torch.no_grad():
        if not time_major:
            log_rhos = log_rhos.transpose(0, 1)
        rewards, values, is_last, discounts = _prepare(rewards, values, step_types, discounts,
                                                       time_major)
        rhos = _expand_as(torch.exp(log_rhos[:-1].to(values.dtype)), values)

        def clip(x, threshold):
            return x if threshold is None else x.clamp(max=threshold)

        not_last = 1 - is_last[:-1]
        gd = gamma * discounts[1:]
        a = not_last * clip(rhos, clip_rho_threshold) * (rewards[1:] + gd * values[1:] - values[:-1])
        c = not_last * gd * td_lambda * clip(rhos, clip_c_threshold)
        vs_minus_v = _backward_recursion(a, c, torch.zeros_like(values[-1]))
        vs = vs_minus_v + values[:-1]
        vs_next = torch.cat([vs[1:], values[-1:]], dim=0)
        pg_adv = not_last * clip(rhos, clip_pg_rho_threshold) * (
            rewards[1:] + gd * vs_next - values[:-1])
        return VTraceReturns(_out_major(vs, time_major), _out_major(pg_adv, time_major))


def n_step_return(rewards: torch.Tensor, values: torch.Tensor, step_types: torch.Tensor,
                  discounts: torch.Tensor, n: int, gamma: Scalar = 0.99,
                  time_major: bool = True) -> torch.Tensor:
    """n-step bootstrapped returns of the first ``T - 1`` steps.

    ``G[t] = sum_{k<m} gamma^k D_k r[t+k+1] + gamma^m D_m V[t+m]`` with
    ``D_k = prod_{j=1..k} d[t+j]`` and ``m = min(n, T-1-t, steps until the
    episode's LAST step)``: the sum stops early at the end of the unroll or at
    a LAST step (whose value is bootstrapped, discounted by its ``d``).
    ``G[t] = V[t]`` where ``step_types[t] == LAST``. ``n = 1`` is
    :func:`one_step_discounted_return`; ``n >= T - 1`` is :func:`discounted_return`.

    Shapes as :func:`discounted_return`; returns ``[T - 1, B, ...]``, no gradient.
    Costs ``O(n)`` vectorised passes.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    with torch.no_grad():
        rewards, values, is_last, discounts = _prepare(rewards, values, step_types, discounts,
                                                       time_major)
        m = rewards.shape[0] - 1
        ret = torch.zeros_like(values[:-1])
        disc = torch.ones_like(ret)
        boot = values[:-1].clone()
        is_last = is_last.bool()
        alive = ~is_last[:-1]  # True while the n-step window of row t is still open
        for k in range(min(n, m)):
            rows = slice(0, m - k)  # rows t whose step t+k+1 exists
            al = alive[rows]
            ret[rows] += al * disc[rows] * rewards[k + 1:]
            disc[rows] = torch.where(al, disc[rows] * gamma * discounts[k + 1:], disc[rows])
            boot[rows] = torch.where(al, values[k + 1:], boot[rows])
            alive[rows] = al & ~is_last[k + 1:]
        return _out_major(ret + disc * boot, time_major)
