"""What the tree search needs of a model, and what it returns.

The search never owns a model: it takes one per call, so MuZero's learned networks
(representation + dynamics + prediction) and a perfect simulator of a known game fit
the same :class:`SearchModel` protocol. Shapes: ``B`` searches (environments) at once,
``A`` discrete actions, the latent any tensor ``[B, ...]``.

Conventions (both players' case included):

- ``value`` at a state is the discounted return expected by the player to move there;
- ``reward`` of ``recurrent_inference(latent, action)`` is the reward of the player who
  took ``action``;
- the model makes every action possible at every latent (MuZero's learned dynamics do;
  a known model can make an illegal move end the game with a loss). Only the root
  takes a legal-action mask.
"""
from typing import NamedTuple, Protocol, Tuple

import torch


class SearchModel(Protocol):
    """A model the tree search can plan with (duck-typed: any object with these two)."""

    def initial_inference(self, observation) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``observation`` (any nest the model reads, batch ``B``) ->
        ``(latent [B, ...], prior_logits [B, A], value [B])`` at the root."""

    def recurrent_inference(self, latent: torch.Tensor, action: torch.Tensor
                            ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``latent [B, ...]``, ``action [B]`` (int64) ->
        ``(next_latent [B, ...], reward [B], prior_logits [B, A], value [B])``."""


class SearchResult(NamedTuple):
    """The outcome of one search of ``B`` roots with ``A`` actions.

    Attributes:
        action: ``[B]`` int64, the action to take (sampled from the visit counts with the
            temperature, or Gumbel MuZero's choice).
        policy: ``[B, A]`` the search policy, a training target: the visit distribution
            ``N(a) / sum N`` (visit-count selection) or Gumbel MuZero's improved policy
            ``softmax(logits + sigma(completed Q))`` (0 on illegal actions).
        value: ``[B]`` the root's value, the mean of the returns backed up through it.
        q_values: ``[B, A]`` the root's action values ``r + discount * V(child)`` (sign
            flipped for two players); an unvisited or illegal action gets ``value``.
        visit_counts: ``[B, A]`` visits of each root action.
        prior: ``[B, A]`` the root's prior probabilities the search used (after
            Dirichlet noise, if any).
    """
    action: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    q_values: torch.Tensor
    visit_counts: torch.Tensor
    prior: torch.Tensor
