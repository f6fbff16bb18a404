"""n-step transitions from sampled ``[B, L]`` sequences (``L >= n + 1``).

For a sequence whose step 0 is ``s_t`` (time step ``t``), with ``m`` the
number of steps actually used::

    m        = min(n, first k >= 1 such that step k is LAST)
    reward   = sum_{k=1..m} gamma^(k-1) * r_{t+k}        (r_{t+k}: time_step.reward at step k)
    discount = gamma^m * discount_{t+m}                   (0 on termination, gamma^m on truncation)
    next_observation = s_{t+m}

so the TD target is ``reward + discount * V(s_{t+m})``. Rewards after a
``LAST`` belong to the next episode and are never accumulated. A truncated
episode (``LAST`` with discount 1) bootstraps from its final observation, which
the environment stores at the ``LAST`` step. A row whose step 0 is ``LAST``
has no transition (the action there was ignored by the environment):
``valid = 0``, and its other fields are finite but meaningless. So has a row
that runs into a ``FIRST`` not preceded by a ``LAST`` (a seam: an async env
worker restarted with fresh envs after the row's last written step; envs never
produce one).
"""
from typing import Any, NamedTuple

import torch

from alf import nest as alf_nest
from alf.data_structures import BatchInfo, Experience, StepType


class Transition(NamedTuple):
    """One n-step transition per row, built from a sampled [B, L>=n+1] sequence.  All [B, ...]."""
    observation: Any        # s_t  (time_step.observation at step 0)
    action: Any             # a_t  (experience.action at step 0)
    reward: torch.Tensor    # [B] (or [B,k]) sum_{k=1..m} gamma^(k-1) r_{t+k}
    discount: torch.Tensor  # [B] bootstrap multiplier gamma^m * discount_{t+m}  (0 if terminated)
    next_observation: Any   # s_{t+m}, the state to bootstrap from
    valid: torch.Tensor     # [B] float32: 0 where step 0 is LAST (its action was ignored by the env)
    time_step: Any          # the full TimeStep at step 0 (nest [B])
    next_time_step: Any     # the full TimeStep at step m
    rollout_info: Any       # experience.rollout_info at step 0
    state: Any              # experience.state at step 0
    importance_weights: torch.Tensor  # [B] from BatchInfo (ones if absent)
    batch_info: Any         # the BatchInfo (env_ids, positions...) or ()


def make_transitions(experience: Experience, n_step: int, gamma: float) -> Transition:
    """Build n-step :class:`Transition` s ``[B]`` from batch-major ``experience [B, L]``.

    Args:
        experience: ``[B, L]`` with ``L >= n_step + 1`` (as ``get_batch`` returns it;
            ``batch_info`` supplies the importance weights if set).
        n_step: ``n >= 1``.
        gamma: discount factor.
    Returns:
        :class:`Transition` with every field ``[B, ...]`` (see module docstring for
        the formulas). Vectorised over ``B``; a Python loop over ``n`` only.
    """
    if n_step < 1:
        raise ValueError(f"n_step must be >= 1, got {n_step}")
    ts = experience.time_step
    step_type = ts.step_type  # [B, L]
    B, L = step_type.shape[:2]
    if L < n_step + 1:
        raise ValueError(f"make_transitions(n_step={n_step}) needs sequences of at least "
                         f"{n_step + 1} steps, got {L}")
    device = step_type.device
    batch_info = experience.batch_info
    weights = batch_info.importance_weights if isinstance(batch_info, BatchInfo) else ()
    if not isinstance(weights, torch.Tensor):
        weights = torch.ones(B, dtype=torch.float32, device=device)
    if n_step == 1:
        return _one_step_transitions(experience, gamma, weights)
    reward = ts.reward  # [B, L] or [B, L, k]
    is_last = step_type == StepType.LAST  # [B, L]
    is_first = step_type == StepType.FIRST
    seam = torch.zeros(B, dtype=torch.bool, device=device)  # a FIRST without a LAST before it

    ret = torch.zeros_like(reward[:, 0])
    active = torch.ones(B, dtype=torch.bool, device=device)  # no LAST among steps 1..k-1
    m = torch.full((B,), n_step, dtype=torch.int64, device=device)
    for k in range(1, n_step + 1):
        r_k = reward[:, k]
        mask = active.reshape((B,) + (1,) * (r_k.ndim - 1))
        ret = ret + torch.where(mask, r_k * (gamma ** (k - 1)), torch.zeros_like(r_k))
        seam = seam | (active & is_first[:, k])
        m = torch.where(active & is_last[:, k], torch.full_like(m, k), m)
        active = active & ~is_last[:, k]

    rows = torch.arange(B, device=device)
    at_m = lambda x: x[rows, m]  # noqa: E731
    at_0 = lambda x: x[:, 0]  # noqa: E731
    next_time_step = alf_nest.map_structure(at_m, ts)
    disc_m = next_time_step.discount
    gamma_m = torch.pow(torch.tensor(float(gamma), dtype=disc_m.dtype, device=device),
                        m.to(disc_m.dtype))
    discount = gamma_m.reshape(gamma_m.shape + (1,) * (disc_m.ndim - 1)) * disc_m

    time_step = alf_nest.map_structure(at_0, ts)
    return Transition(
        observation=time_step.observation,
        action=alf_nest.map_structure(at_0, experience.action),
        reward=ret,
        discount=discount,
        next_observation=next_time_step.observation,
        valid=((step_type[:, 0] != StepType.LAST) & ~seam).to(torch.float32),
        time_step=time_step,
        next_time_step=next_time_step,
        rollout_info=alf_nest.map_structure(at_0, experience.rollout_info),
        state=alf_nest.map_structure(at_0, experience.state),
        importance_weights=weights.to(torch.float32),
        batch_info=batch_info,
    )


def _one_step_transitions(experience: Experience, gamma: float,
                          weights: torch.Tensor) -> Transition:
    """``n_step == 1``: ``m = 1`` for every row, so every field is a view of step 0 or
    step 1 (no gather, no loop); same numbers as the general path."""
    time_step, action, rollout_info, state = alf_nest.map_structure(
        lambda x: x[:, 0],
        (experience.time_step, experience.action, experience.rollout_info, experience.state))
    next_time_step = alf_nest.map_structure(lambda x: x[:, 1], experience.time_step)
    # a float32 tensor times a Python float computes in float32: the same numbers as
    # tensor(gamma ** m) * discount in the general path
    discount = next_time_step.discount * float(gamma)
    return Transition(
        observation=time_step.observation,
        action=action,
        reward=next_time_step.reward,
        discount=discount,
        next_observation=next_time_step.observation,
        valid=((time_step.step_type != StepType.LAST)
               & (next_time_step.step_type != StepType.FIRST)).to(torch.float32),
        time_step=time_step,
        next_time_step=next_time_step,
        rollout_info=rollout_info,
        state=state,
        importance_weights=weights.to(torch.float32),
        batch_info=experience.batch_info,
    )
