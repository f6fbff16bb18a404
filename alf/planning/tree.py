"""Preallocated storage of ``B`` search trees, one tensor per node statistic.

Node ``0`` is the root; simulation ``k`` (0-based) adds node ``k + 1`` to every tree, so
``num_nodes = num_simulations + 1`` is known before the search and nothing grows: each
statistic is one tensor ``[B, num_nodes, ...]`` and a step of the search for the whole
batch is a gather or an indexed write at ``[rows, node]`` (``rows = arange(B)``).
"""
from typing import Optional, Tuple

import torch


class Tree:
    """``B`` trees of ``N`` nodes with ``A`` actions each.

    Attributes (``D``: the value dtype, the model's):
        visits ``[B, N]`` D: how often each node was backed up through (the root counts
            only simulations; any other node also its own expansion).
        value_sum ``[B, N]`` D: sum of the returns backed up, seen by the node's mover.
        reward ``[B, N]`` D: reward of the edge into the node, seen by the parent's mover.
        raw_value ``[B, N]`` D: the model's value at the node (Gumbel's ``v_mix``).
        logits, prior ``[B, N, A]`` D: the model's prior logits (``-inf`` on illegal root
            actions) and probabilities (the root's after Dirichlet noise).
        children ``[B, N, A]`` int64: child node index, ``-1`` while unexpanded.
        latent ``[B, N, ...]``: the model's latent at each node.
        legal ``[B, A]`` bool: the root's legal actions.
        q_min, q_max ``[B]`` D: min-max statistics of the action values seen in each
            tree (MuZero's normalisation; ``+inf``/``-inf`` while none).
    """

    def __init__(self, latent: torch.Tensor, logits: torch.Tensor, value: torch.Tensor,
                 num_nodes: int, legal: Optional[torch.Tensor] = None):
        batch, num_actions = logits.shape
        dtype, device = value.dtype, value.device
        self.rows = torch.arange(batch, device=device)
        self.legal = (torch.ones(batch, num_actions, dtype=torch.bool, device=device)
                      if legal is None else legal.to(device=device, dtype=torch.bool))
        stat = lambda: torch.zeros(batch, num_nodes, dtype=dtype, device=device)  # noqa: E731
        self.visits, self.value_sum, self.reward, self.raw_value = stat(), stat(), stat(), stat()
        self.logits = torch.zeros(batch, num_nodes, num_actions, dtype=dtype, device=device)
        self.prior = torch.zeros_like(self.logits)
        self.children = torch.full((batch, num_nodes, num_actions), -1, dtype=torch.int64,
                                   device=device)
        self.latent = latent.new_zeros((batch, num_nodes) + tuple(latent.shape[1:]))
        self.q_min = torch.full((batch,), float("inf"), dtype=dtype, device=device)
        self.q_max = torch.full((batch,), float("-inf"), dtype=dtype, device=device)
        root_logits = logits.to(dtype).masked_fill(~self.legal, float("-inf"))
        self.write(0, latent, root_logits, value, torch.zeros_like(value))

    def write(self, index: int, latent: torch.Tensor, logits: torch.Tensor,
              value: torch.Tensor, reward: torch.Tensor) -> None:
        """Store a new node ``index`` in every tree: ``latent [B, ...]``, ``logits [B, A]``,
        ``value [B]``, ``reward [B]`` (of the edge into it)."""
        self.latent[:, index] = latent
        self.logits[:, index] = logits
        self.prior[:, index] = torch.softmax(logits, dim=-1)
        self.raw_value[:, index] = value
        self.reward[:, index] = reward

    def children_stats(self, node: torch.Tensor, discount: float, sign: float
                       ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Of each tree's ``node [B]``: its children's ``visits [B, A]``, whether each was
        visited ``[B, A]``, and their action values ``r + discount * sign * V(child)``
        seen by the node's mover ``[B, A]`` (0 where unvisited)."""
        child = self.children[self.rows, node]
        visited = child >= 0
        idx = child.clamp(min=0)
        visits = torch.where(visited, self.visits.gather(1, idx), 0)
        mean = self.value_sum.gather(1, idx) / visits.clamp(min=1)
        q = torch.where(visited, self.reward.gather(1, idx) + discount * sign * mean, 0)
        return visits, visited, q

    def normalise(self, q: torch.Tensor, spread_free: Optional[float] = None) -> torch.Tensor:
        """MuZero's min-max normalisation of ``q [B, ...]`` by each tree's statistics.
        While a tree has seen no spread of values, ``q`` is unchanged (MuZero's pUCT), or
        ``spread_free`` where given (Gumbel's sigma: 0, so the improved policy does not
        depend on the reward scale before the tree has two values, as mctx's
        ``(q - min) / max(max - min, eps)``)."""
        lo = self.q_min.view(-1, *([1] * (q.dim() - 1)))
        hi = self.q_max.view(-1, *([1] * (q.dim() - 1)))
        flat = q if spread_free is None else torch.full_like(q, spread_free)
        return torch.where(hi > lo, (q - lo) / (hi - lo), flat)

    def update_min_max(self, q: torch.Tensor, mask: torch.Tensor) -> None:
        """Widen each tree's min-max statistics by ``q [B]`` where ``mask [B]``."""
        self.q_min = torch.where(mask, torch.minimum(self.q_min, q), self.q_min)
        self.q_max = torch.where(mask, torch.maximum(self.q_max, q), self.q_max)
