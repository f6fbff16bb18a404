"""Small models for the tree-search tests: random per-row networks, a bandit, a two-step
tree and a perfect tic-tac-toe simulator, all :class:`alf.planning.search_model.SearchModel`s."""
from typing import Tuple

import torch

Out = Tuple[torch.Tensor, ...]


class RandomModel:
    """A different random model in each batch row: ``latent [B, H]``,
    ``next = tanh(W_b[a] @ latent)``, linear reward, logits and value heads."""

    def __init__(self, batch: int, num_actions: int, hidden: int = 4, seed: int = 0,
                 dtype: torch.dtype = torch.float64, params: dict = None):
        if params is None:
            g = torch.Generator().manual_seed(seed)
            r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
            params = {"w": r(batch, num_actions, hidden, hidden), "reward": r(batch, hidden),
                      "logits": r(batch, hidden, num_actions), "value": r(batch, hidden)}
        self.p = params

    def row(self, b: int) -> "RandomModel":
        """Row ``b``'s model alone (batch 1), for the per-env reference search."""
        return RandomModel(1, 0, params={k: v[b:b + 1] for k, v in self.p.items()})

    def _heads(self, latent: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return (torch.einsum("bh,bha->ba", latent, self.p["logits"]),
                (latent * self.p["value"]).sum(-1))

    def initial_inference(self, obs: torch.Tensor) -> Out:
        latent = torch.tanh(obs.to(self.p["value"].dtype))
        return (latent,) + self._heads(latent)

    def recurrent_inference(self, latent: torch.Tensor, action: torch.Tensor) -> Out:
        w = self.p["w"][torch.arange(latent.shape[0]), action]
        nxt = torch.tanh(torch.einsum("bij,bj->bi", w, latent))
        reward = (latent * self.p["reward"]).sum(-1) * 0.5
        return (nxt, reward) + self._heads(nxt)


class BanditModel:
    """One step of ``A`` arms with known mean rewards ``means [A]``, then nothing."""

    def __init__(self, means):
        self.means = torch.as_tensor(means, dtype=torch.float32)

    def initial_inference(self, obs: torch.Tensor) -> Out:
        b, a = obs.shape[0], self.means.shape[0]
        return torch.zeros(b, 1), torch.zeros(b, a), torch.zeros(b)

    def recurrent_inference(self, latent: torch.Tensor, action: torch.Tensor) -> Out:
        b, a = latent.shape[0], self.means.shape[0]
        first = latent[:, 0] == 0
        reward = torch.where(first, self.means[action], 0.0)
        return torch.ones(b, 1), reward, torch.zeros(b, a), torch.zeros(b)


class TwoStepModel:
    """Two actions. Action 0 pays ``0.5`` now and nothing after; action 1 pays nothing
    now and ``1.0`` on the next step (any action). Values are 0, so only a second-step
    expansion shows action 1's worth: ``discount * 1.0`` against ``0.5``.
    Latent ``[depth, branch]``."""

    def initial_inference(self, obs: torch.Tensor) -> Out:
        b = obs.shape[0]
        return torch.zeros(b, 2), torch.zeros(b, 2), torch.zeros(b)

    def recurrent_inference(self, latent: torch.Tensor, action: torch.Tensor) -> Out:
        depth, branch = latent[:, 0], latent[:, 1]
        reward = torch.where(depth == 0, torch.where(action == 0, 0.5, 0.0),
                             torch.where((depth == 1) & (branch == 1), 1.0, 0.0))
        nxt_branch = torch.where(depth == 0, action.float(), branch)
        nxt = torch.stack([depth + 1, nxt_branch], -1)
        return nxt, reward, torch.zeros_like(latent), torch.zeros_like(depth)


_LINES = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8],
                       [0, 4, 8], [2, 4, 6]])


class TicTacToeModel:
    """A perfect tic-tac-toe simulator. Latent ``[B, 10]``: the board from the mover's
    side (+1 own, -1 the opponent's, 0 empty) and a game-over flag. A move that wins
    pays the mover +1; an illegal move loses (-1) and ends the game; an ended game is
    absorbing (reward and value 0). Priors are uniform, values 0: only the search sees
    who wins."""

    def initial_inference(self, board: torch.Tensor) -> Out:
        b = board.shape[0]
        latent = torch.cat([board.float(), torch.zeros(b, 1)], -1)
        return latent, torch.zeros(b, 9), torch.zeros(b)

    def recurrent_inference(self, latent: torch.Tensor, action: torch.Tensor) -> Out:
        board, done = latent[:, :9].clone(), latent[:, 9] > 0
        rows = torch.arange(board.shape[0])
        illegal = board[rows, action] != 0
        board[rows, action] = torch.where(done | illegal, board[rows, action], 1.0)
        won = (board[:, _LINES] == 1).all(-1).any(-1) & ~done & ~illegal
        full = (board != 0).all(-1)
        reward = torch.where(done, 0.0, torch.where(illegal, -1.0, won.float()))
        over = done | illegal | won | full
        nxt = torch.cat([-board, over.float().unsqueeze(-1)], -1)
        b = board.shape[0]
        return nxt, reward, torch.zeros(b, 9), torch.zeros(b)
