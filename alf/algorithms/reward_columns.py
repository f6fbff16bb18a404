"""``RewardColumns``: how an actor-critic algorithm with ``reward_spec [k]`` treats each
reward column (docs/design/agent.md, decision 3).

With a vector reward (an :class:`~alf.algorithms.agent.Agent`'s extrinsic and intrinsic
rewards), PPO, APPO and IMPALA learn one value per column: GAE / V-trace run per
column, with the column's own discount factor and episodic flag, and the policy
follows the weighted sum of the columns' advantages, ``A = sum_i w_i A_i``. A weight
change then needs no value re-fit (weights multiply advantages, not value targets),
and a column can be non-episodic: RND's intrinsic return flows across episode ends
with its own discount (Burda et al. 2018, sec. 2.3: 0.99 intrinsic, 0.999 extrinsic,
two value heads).

Non-episodic columns: the run's ``LAST`` steps count as ordinary steps and the
discount is 1, so their return continues into the next episode (whose first step
carries reward 0 in every column).
"""
from typing import Optional, Sequence, Tuple

import torch
from torch import nn

from alf.data_structures import StepType


class RewardColumns(nn.Module):
    """Weights, discount factors and episodic flags of ``k`` reward columns.

    Buffers:
        weights ``[k]``: the advantage of column ``i`` is scaled by ``weights[i]``
            (checkpointed with the algorithm that owns this module).
        gammas ``[k]``: each column's discount factor (configuration: not
            checkpointed, so a resumed run uses the config's).
        episodic ``[k]`` bool: whether the column's return ends with the episode
            (configuration, as ``gammas``).

    Args:
        num_columns: ``k``.
        gamma: every column's discount factor until :meth:`configure` says otherwise.
    """

    def __init__(self, num_columns: int, gamma: float):
        super().__init__()
        self.register_buffer("weights", torch.ones(num_columns))
        self.register_buffer("gammas", torch.full((num_columns,), float(gamma)),
                             persistent=False)
        self.register_buffer("episodic", torch.ones(num_columns, dtype=torch.bool),
                             persistent=False)

    @property
    def num_columns(self) -> int:
        return int(self.weights.numel())

    def configure(self, gammas: Optional[Sequence[Optional[float]]] = None,
                  episodic: Optional[Sequence[bool]] = None) -> None:
        """Set each column's discount factor (None entries keep theirs) and episodic flag."""
        if gammas is not None:
            self._check_length("gammas", gammas)
            for i, g in enumerate(gammas):
                if g is not None:
                    self.gammas[i] = float(g)
        if episodic is not None:
            self._check_length("episodic", episodic)
            self.episodic.copy_(torch.tensor([bool(e) for e in episodic]))

    def set_weights(self, weights: torch.Tensor) -> None:
        """``weights [k]``: the columns' advantage weights from now on."""
        self._check_length("weights", weights)
        self.weights.copy_(torch.as_tensor(weights, dtype=self.weights.dtype))

    def _check_length(self, what: str, values: Sequence) -> None:
        if len(values) != self.num_columns:
            raise ValueError(f"RewardColumns: {len(values)} {what} for {self.num_columns} "
                             "reward columns")

    def per_column(self, step_types: torch.Tensor, discounts: torch.Tensor
                   ) -> Tuple[torch.Tensor, torch.Tensor]:
        """``step_types``, ``discounts`` ``[.., T]`` -> ``[.., T, k]`` with the non-episodic
        columns' ``LAST`` steps turned into ``MID`` steps of discount 1."""
        shape = tuple(step_types.shape) + (self.num_columns,)
        st = step_types.unsqueeze(-1).expand(shape)
        d = discounts.unsqueeze(-1).expand(shape)
        if bool(self.episodic.all()):
            return st, d
        continuing = ~self.episodic.to(st.device)
        st = torch.where(continuing & (st == StepType.LAST),
                         torch.full_like(st, int(StepType.MID)), st)
        d = torch.where(continuing, torch.ones_like(d), d)
        return st, d

    def value_mask(self, step_types: torch.Tensor) -> torch.Tensor:
        """``[..., k]`` float: where each column's value is trained. Every column's except
        at ``LAST`` steps (no target there), where non-episodic columns still train:
        their return continues into the next episode, and the steps before bootstrap
        from this value."""
        not_last = (step_types != StepType.LAST).unsqueeze(-1)
        continuing = ~self.episodic.to(step_types.device)
        return (not_last | continuing).to(torch.float32)

    def combine(self, advantages: torch.Tensor) -> torch.Tensor:
        """``[..., k]`` per-column advantages -> ``[...]``: ``sum_i w_i A_i``."""
        return (advantages * self.weights.to(advantages.dtype)).sum(-1)
