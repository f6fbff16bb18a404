"""A plain-Python search of one environment's tree of node objects, with the same rules
as :class:`~alf.planning.tree_search.TreeSearch`.

What it is for: the batched search's tests compare visit counts with it (same model,
no noise: the same tree), and ``bench/mcts_speed.py`` measures what batching buys
against it. It is the straightforward per-env loop most MCTS code is: readable, slow.
Random draws are arguments (``noise``, ``gumbel``) so a test can give both searches
the same ones.
"""
import math
from typing import Any, Dict, List, Optional, Sequence

import torch

from alf.planning.scores import halving_schedule
from alf.planning.search_model import SearchModel


class Node:
    """One state: the model's outputs there and the statistics backed up through it."""

    def __init__(self, latent: torch.Tensor, logits: Sequence[float], value: float,
                 reward: float):
        self.latent, self.value, self.reward = latent, value, reward
        self.logits = list(logits)
        top = max(self.logits)
        e = [math.exp(x - top) if x > -math.inf else 0.0 for x in self.logits]
        self.prior = [x / sum(e) for x in e]
        self.children: Dict[int, "Node"] = {}
        self.visits, self.value_sum = 0, 0.0

    def mean(self) -> float:
        """Mean backed-up return, seen by this node's mover."""
        return self.value_sum / self.visits if self.visits else 0.0


def _floats(t: torch.Tensor) -> List[float]:
    return [float(x) for x in t.reshape(-1)]


class ReferenceSearch:
    """One environment's MCTS; parameters as :class:`TreeSearch` (same names)."""

    def __init__(self, num_simulations: int = 50, discount: float = 0.997,
                 action_selection: str = "visit_count", pb_c_init: float = 1.25,
                 pb_c_base: float = 19652.0, root_exploration_fraction: float = 0.25,
                 two_player: bool = False, max_considered_actions: int = 16,
                 c_visit: float = 50.0, c_scale: float = 0.1):
        self.n, self.discount = num_simulations, discount
        self.gumbel_mode = action_selection == "gumbel"
        self.c1, self.c2 = pb_c_init, pb_c_base
        self.fraction = 0.0 if self.gumbel_mode else root_exploration_fraction
        self.sign = -1.0 if two_player else 1.0
        self.max_considered, self.c_visit, self.c_scale = max_considered_actions, c_visit, c_scale

    @torch.no_grad()
    def search(self, model: SearchModel, observation: Any, legal: Optional[Sequence[bool]] = None,
               noise: Optional[Sequence[float]] = None,
               gumbel: Optional[Sequence[float]] = None) -> Dict[str, Any]:
        """Search from one observation (batch 1 for the model). ``noise``: the Dirichlet
        draw (visit counts; None: no noise); ``gumbel``: the Gumbel draw (None: zeros).
        Returns ``visits``, ``policy``, ``value``, ``q``, ``action`` of the root."""
        latent, logits, value = model.initial_inference(observation)
        a_n = logits.shape[-1]
        self.legal = [True] * a_n if legal is None else [bool(x) for x in legal]
        masked = [x if ok else -math.inf for x, ok in zip(_floats(logits), self.legal)]
        root = Node(latent, masked, float(value.reshape(())), 0.0)
        if noise is not None and self.fraction > 0:
            f = self.fraction
            root.prior = [(1 - f) * p + f * e for p, e in zip(root.prior, noise)]
        self.lo, self.hi = math.inf, -math.inf
        self.g = list(gumbel) if gumbel is not None else [0.0] * a_n
        self.considered = self._considered(root) if self.gumbel_mode else []
        for k in range(self.n):
            self._simulate(model, root, k)
        return self._result(root)

    def _considered(self, root: Node) -> List[int]:
        """Gumbel-top-k: the legal actions with the largest ``g + logits``."""
        legal = [a for a in range(len(self.legal)) if self.legal[a]]
        ranked = sorted(legal, key=lambda a: (-(self.g[a] + root.logits[a]), a))
        m = min(len(legal), self.max_considered)
        self.schedule = halving_schedule(m, self.n)
        return ranked[:m]

    def _simulate(self, model: SearchModel, root: Node, k: int) -> None:
        """Select to an unexpanded edge, expand it with one model call, back up."""
        path, node = [root], root
        while True:
            a = self._choose(node, k if node is root else None)
            if a not in node.children:
                break
            node = node.children[a]
            path.append(node)
        latent, reward, logits, value = model.recurrent_inference(
            node.latent, torch.tensor([a]))
        leaf = Node(latent, _floats(logits), float(value.reshape(())), float(reward.reshape(())))
        node.children[a] = leaf
        ret = leaf.value
        for n in reversed(path + [leaf]):
            n.value_sum += ret
            n.visits += 1
            if n is not root:
                q = n.reward + self.discount * self.sign * n.mean()
                self.lo, self.hi = min(self.lo, q), max(self.hi, q)
            ret = n.reward + self.discount * self.sign * ret

    def _q(self, node: Node, a: int) -> float:
        c = node.children[a]
        return c.reward + self.discount * self.sign * c.mean()

    def _norm(self, q: float, spread_free: Optional[float] = None) -> float:
        if self.hi > self.lo:
            return (q - self.lo) / (self.hi - self.lo)
        return q if spread_free is None else spread_free

    def _sigma(self, node: Node) -> List[float]:
        """Gumbel MuZero's sigma of the normalised completed Q of every action."""
        a_n = len(node.prior)
        visits = [node.children[a].visits if a in node.children else 0 for a in range(a_n)]
        seen = [a for a in range(a_n) if a in node.children]
        p_seen = sum(node.prior[a] for a in seen)
        mean_q = sum(node.prior[a] * self._q(node, a) for a in seen) / p_seen if p_seen > 0 else 0.0
        v_mix = (node.value + sum(visits) * mean_q) / (1 + sum(visits))
        scale = (self.c_visit + max(visits)) * self.c_scale
        return [scale * self._norm(self._q(node, a) if a in node.children else v_mix, 0.0)
                for a in range(a_n)]

    def _choose(self, node: Node, k: Optional[int]) -> int:
        """The action to follow at ``node`` (``k``: the simulation, at the root)."""
        a_n = len(node.prior)
        visits = [node.children[a].visits if a in node.children else 0 for a in range(a_n)]
        allowed = [a for a in range(a_n) if k is None or self.legal[a]]
        if not self.gumbel_mode:
            c = self.c1 + math.log((node.visits + self.c2 + 1) / self.c2)
            u = {a: (self._norm(self._q(node, a)) if a in node.children else 0.0)
                 + node.prior[a] * math.sqrt(node.visits) / (1 + visits[a]) * c for a in allowed}
            return max(allowed, key=lambda a: (u[a], -a))
        sig = self._sigma(node)
        if k is None:
            z = [node.logits[a] + sig[a] for a in range(a_n)]
            top = max(z)
            e = [math.exp(x - top) for x in z]
            s = [e[a] / sum(e) - visits[a] / (1 + sum(visits)) for a in range(a_n)]
            return max(range(a_n), key=lambda a: (s[a], -a))
        due = [a for a in self.considered if visits[a] == self.schedule[k]] or self.considered
        return max(due, key=lambda a: (self.g[a] + node.logits[a] + sig[a], -a))

    def _result(self, root: Node) -> Dict[str, Any]:
        """Root visits, search policy, value, per-action Q and the greedy action."""
        a_n = len(root.prior)
        visits = [root.children[a].visits if a in root.children else 0 for a in range(a_n)]
        value = root.mean()
        q = [self._q(root, a) if a in root.children else value for a in range(a_n)]
        if self.gumbel_mode:
            sig = self._sigma(root)
            z = [root.logits[a] + sig[a] for a in range(a_n)]
            top = max(z)
            e = [math.exp(x - top) if x > -math.inf else 0.0 for x in z]
            policy = [x / sum(e) for x in e]
            most = max(visits[a] for a in self.considered)
            finalists = [a for a in self.considered if visits[a] == most]
            action = max(finalists, key=lambda a: (self.g[a] + z[a], -a))
        else:
            policy = [v / sum(visits) for v in visits]
            action = max(range(a_n), key=lambda a: (visits[a], -a))
        return {"visits": visits, "policy": policy, "value": value, "q": q, "action": action}
