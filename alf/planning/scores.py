"""The selection rules of the search, as batched tensor maths (no tree access).

- :func:`puct_scores`: MuZero's pUCT (Schrittwieser et al. 2020, Appendix B)::

      score(a) = Qn(a) + P(a) * sqrt(N) / (1 + N(a)) * (c1 + log((N + c2 + 1) / c2))

  ``Qn`` the min-max normalised action value (0 while unvisited), ``N`` the node's visits.
- :func:`completed_q`, :func:`sigma`, :func:`gumbel_interior_scores`: Gumbel MuZero
  (Danihelka et al. 2022): unvisited actions take ``v_mix`` (their Eq. 33), the
  monotone transform ``sigma(q) = (c_visit + max_b N(b)) * c_scale * q``, and the
  deterministic interior rule ``argmax_a pi'(a) - N(a) / (1 + sum_b N(b))`` with
  ``pi' = softmax(logits + sigma(completed q))`` (their Eq. 14).
- :func:`halving_schedule`: the visit count sequential halving gives the root action
  chosen at each simulation.
"""
import math
from typing import List

import torch


def puct_scores(prior: torch.Tensor, child_visits: torch.Tensor, node_visits: torch.Tensor,
                q_normalised: torch.Tensor, c1: float, c2: float) -> torch.Tensor:
    """pUCT ``[B, A]`` from ``prior``, ``child_visits``, ``q_normalised [B, A]`` and
    ``node_visits [B]``."""
    n = node_visits.unsqueeze(-1)
    c = c1 + torch.log((n + c2 + 1) / c2)
    return q_normalised + prior * torch.sqrt(n) / (1 + child_visits) * c


def completed_q(q: torch.Tensor, visited: torch.Tensor, prior: torch.Tensor,
                child_visits: torch.Tensor, raw_value: torch.Tensor) -> torch.Tensor:
    """``q [B, A]`` with each unvisited action's value replaced by ``v_mix [B]``: the
    model's ``raw_value [B]`` mixed with the prior-weighted mean of the visited ``q``,
    weighted by the visits (a node with no visited child: ``raw_value``)."""
    total = child_visits.sum(-1)
    p_visited = torch.where(visited, prior, 0).sum(-1)
    q_visited = torch.where(visited, prior * q, 0).sum(-1)
    mean_q = torch.where(p_visited > 0, q_visited / p_visited.clamp(min=1e-30), 0)
    v_mix = (raw_value + total * mean_q) / (1 + total)
    return torch.where(visited, q, v_mix.unsqueeze(-1))


def sigma(q_normalised: torch.Tensor, child_visits: torch.Tensor, c_visit: float,
          c_scale: float) -> torch.Tensor:
    """Gumbel MuZero's ``sigma [B, A]`` of the normalised completed values."""
    max_visits = child_visits.max(-1, keepdim=True).values
    return (c_visit + max_visits) * c_scale * q_normalised


def gumbel_interior_scores(improved_logits: torch.Tensor, child_visits: torch.Tensor
                           ) -> torch.Tensor:
    """``pi'(a) - N(a) / (1 + sum_b N(b))`` ``[B, A]``: visits follow the improved policy."""
    improved = torch.softmax(improved_logits, dim=-1)
    return improved - child_visits / (1 + child_visits.sum(-1, keepdim=True))


def halving_schedule(num_considered: int, num_simulations: int) -> List[int]:
    """Sequential halving's budget (Danihelka et al. 2022, Section 4): entry ``k`` is the
    visit count the root action chosen at simulation ``k`` has before it.

    There are ``ceil(log2(m))`` phases; in a phase each of the ``k`` remaining actions
    gets ``max(1, floor(n / (phases * k)))`` more visits, one round over them at a
    time, then the better half stays (at least 2). Leftover simulations keep halving.
    """
    if num_considered <= 1:
        return list(range(num_simulations))
    phases = math.ceil(math.log2(num_considered))
    schedule: List[int] = []
    remaining, visits = num_considered, 0
    while len(schedule) < num_simulations:
        for _ in range(max(1, num_simulations // (phases * remaining))):
            schedule += [visits] * remaining
            visits += 1
        remaining = max(2, remaining // 2)
    return schedule[:num_simulations]
