"""A batched Monte-Carlo tree search: ``B`` roots searched at once, in torch, on the
device of the model's outputs, with the model an argument (:class:`SearchModel`).

Rules, by source:

- selection by pUCT with MuZero's constants ``c1``/``c2``, min-max normalised action
  values, intermediate rewards and a discount (Schrittwieser et al. 2020, Appendix B);
- Dirichlet noise on the root's prior, ``(1 - fraction) * P + fraction * Dir(alpha)``
  (Silver et al. 2017/2018, AlphaZero);
- acting from the root's visit counts ``N(a)^(1/T)`` (MuZero), or
- Gumbel MuZero's root (Danihelka et al. 2022): Gumbel-top-k of the prior logits,
  sequential halving over the considered actions, the completed-Q improved policy as
  the search policy, and their deterministic interior selection;
- two players alternating in a zero-sum game: each ply flips the value's sign
  (AlphaZero; MuZero's board games).

One model call per simulation serves the whole batch; the loops are over simulations
and depth only. Layout and parameters: docs/design/tree_search.md.
"""
import functools
from typing import Any, List, NamedTuple, Optional, Tuple

import torch

import alf
from alf.config_ranges import Discount, NonNegative, Positive, PositiveInt, UnitInterval
from alf.errors import ConfigError
from alf.planning import scores
from alf.planning.noise import sample_dirichlet, sample_gumbel
from alf.planning.search_model import SearchModel, SearchResult
from alf.planning.tree import Tree

Path = List[Tuple[torch.Tensor, torch.Tensor]]  # per depth: node [B], on the path [B]


class GumbelRoot(NamedTuple):
    """Gumbel MuZero's root state: the draw ``g [B, A]``, the considered actions (the
    Gumbel-top-k of ``g + logits`` among the legal ones) ``[B, A]`` bool, and each root's
    halving schedule ``[B, num_simulations]`` (visit count due at each simulation)."""
    gumbel: torch.Tensor
    considered: torch.Tensor
    schedule: torch.Tensor


@functools.lru_cache(maxsize=32)
def _halving_table(max_considered: int, num_simulations: int) -> torch.Tensor:
    """``[max_considered + 1, num_simulations]``: row ``m`` is the halving schedule of
    ``m`` considered actions (a root's ``m`` picks its row; built once per shape)."""
    return torch.tensor([scores.halving_schedule(m, num_simulations)
                         for m in range(max_considered + 1)])


@alf.configurable
class TreeSearch:
    """Batched MCTS for discrete actions (MuZero/AlphaZero pUCT or Gumbel MuZero).

    Args:
        num_simulations: simulations per search; each adds one node to every tree and
            calls the model once for the whole batch.
        discount: discount of the rewards and values along a simulated path.
        action_selection: ``"visit_count"``: pUCT everywhere, Dirichlet root noise, the
            action drawn from ``N(a)^(1/temperature)`` and the visit distribution as the
            policy (MuZero); ``"gumbel"``: Gumbel MuZero's root and interior selection,
            its improved policy, no Dirichlet noise.
        temperature: visit-count selection's acting temperature; 0 takes the most visited
            action (Gumbel's action is its own: the Gumbel draw is the exploration).
        pb_c_init: MuZero's ``c1``, the exploration weight of pUCT.
        pb_c_base: MuZero's ``c2``, the visit count where exploration starts growing.
        dirichlet_alpha: concentration of the root's Dirichlet noise (AlphaZero: 0.3 for
            chess, 0.03 for Go; MuZero Atari 0.25).
        root_exploration_fraction: weight of the Dirichlet noise in the root's prior; 0:
            no noise (visit-count selection only).
        two_player: two players alternate (zero-sum): a child's value counts with the
            opposite sign for its parent. Rewards and values are the mover's.
        max_considered_actions: Gumbel: how many root actions Gumbel-top-k keeps for
            sequential halving (Danihelka et al.: 16 for Go/chess, 4 for Atari).
        gumbel_scale: Gumbel: scale of the Gumbel noise; 0 makes the search deterministic.
        c_visit: Gumbel's ``sigma`` offset ``c_visit`` (paper: 50).
        c_scale: Gumbel's ``sigma`` scale ``c_scale`` (paper: 0.1 or 1).
    """

    def __init__(self, num_simulations: PositiveInt = 50, discount: Discount = 0.997,
                 action_selection: str = "visit_count", temperature: NonNegative = 1.0,
                 pb_c_init: NonNegative = 1.25, pb_c_base: Positive = 19652.0,
                 dirichlet_alpha: Positive = 0.25, root_exploration_fraction: UnitInterval = 0.25,
                 two_player: bool = False, max_considered_actions: PositiveInt = 16,
                 gumbel_scale: NonNegative = 1.0, c_visit: NonNegative = 50.0,
                 c_scale: NonNegative = 0.1):
        if action_selection not in ("visit_count", "gumbel"):
            raise ConfigError("TreeSearch.action_selection must be 'visit_count' or "
                              f"'gumbel', got {action_selection!r}")
        self.num_simulations = int(num_simulations)
        self.discount = float(discount)
        self.gumbel = action_selection == "gumbel"
        self.temperature = float(temperature)
        self.c1, self.c2 = float(pb_c_init), float(pb_c_base)
        self.dirichlet_alpha = float(dirichlet_alpha)
        self.noise_fraction = 0.0 if self.gumbel else float(root_exploration_fraction)
        self.sign = -1.0 if two_player else 1.0
        self.max_considered = int(max_considered_actions)
        self.gumbel_scale = float(gumbel_scale)
        self.c_visit, self.c_scale = float(c_visit), float(c_scale)

    @torch.no_grad()
    def search(self, model: SearchModel, observation: Any,
               legal_mask: Optional[torch.Tensor] = None,
               generator: Optional[torch.Generator] = None,
               temperature: Optional[float] = None) -> SearchResult:
        """Search from each of the ``B`` observations.

        Args:
            model: the :class:`SearchModel` to plan with.
            observation: what ``model.initial_inference`` reads (batch ``B``).
            legal_mask: ``[B, A]`` bool, the root's legal actions (None: all); each row
                needs one. Illegal actions are never visited nor chosen.
            generator: the source of every random draw (Dirichlet, Gumbel, the action),
                on the model's device; the same generator state gives the same search.
            temperature: overrides the configured acting temperature (a schedule's value).
        """
        latent, logits, value = model.initial_inference(observation)
        tree = Tree(latent, logits, value, self.num_simulations + 1, legal_mask)
        if legal_mask is not None and not bool(tree.legal.any(-1).all()):
            raise ValueError("TreeSearch: every root needs at least one legal action")
        root = self._prepare_root(tree, generator)
        for k in range(self.num_simulations):
            path, parent, action = self._select(tree, root, k)
            self._expand_and_backup(model, tree, path, parent, action, k + 1)
        return self._result(tree, root, generator, temperature)

    # ------------------------------------------------------------------ root
    def _prepare_root(self, tree: Tree, generator: Optional[torch.Generator]
                      ) -> Optional[GumbelRoot]:
        """Dirichlet noise into the root prior, or the Gumbel draws, the considered actions
        ``[B, A]`` and the halving schedule ``[B, num_simulations]`` (Gumbel)."""
        logits = tree.logits[:, 0]
        if self.noise_fraction > 0:
            noise = sample_dirichlet(self.dirichlet_alpha, tree.legal, logits.dtype, generator)
            f = self.noise_fraction
            tree.prior[:, 0] = (1 - f) * tree.prior[:, 0] + f * noise
        if not self.gumbel:
            return None
        g = sample_gumbel(logits.shape, logits.dtype, logits.device, generator)
        g = self.gumbel_scale * g
        score = g + logits
        order = torch.argsort(score, dim=-1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(
            1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
        m = tree.legal.sum(-1).clamp(max=self.max_considered)
        table = _halving_table(min(order.shape[1], self.max_considered), self.num_simulations)
        return GumbelRoot(g, rank < m.unsqueeze(-1),
                          table.to(device=m.device, dtype=logits.dtype)[m])

    # ------------------------------------------------------------- selection
    def _select(self, tree: Tree, root: Optional[GumbelRoot], k: int
                ) -> Tuple[Path, torch.Tensor, torch.Tensor]:
        """Walk every tree from the root to an unexpanded edge: the path, and each tree's
        leaf parent ``[B]`` and action ``[B]``."""
        node = torch.zeros_like(tree.rows)
        on_path = torch.ones_like(tree.rows, dtype=torch.bool)
        parent, action = node.clone(), node.clone()
        path: Path = []
        depth = 0
        while True:
            path.append((node, on_path))
            a = self._scores(tree, node, root, k if depth == 0 else None).argmax(-1)
            child = tree.children[tree.rows, node, a]
            stops = on_path & (child < 0)
            parent = torch.where(stops, node, parent)
            action = torch.where(stops, a, action)
            on_path = on_path & (child >= 0)
            if not bool(on_path.any()):
                return path, parent, action
            node = torch.where(on_path, child, node)
            depth += 1

    def _scores(self, tree: Tree, node: torch.Tensor, root: Optional[GumbelRoot],
                k: Optional[int]) -> torch.Tensor:
        """Selection scores ``[B, A]`` at ``node [B]``; ``k`` the simulation at the root,
        None below it."""
        visits, visited, q = tree.children_stats(node, self.discount, self.sign)
        prior = tree.prior[tree.rows, node]
        if not self.gumbel:
            qn = torch.where(visited, tree.normalise(q), 0)
            s = scores.puct_scores(prior, visits, tree.visits[tree.rows, node], qn,
                                   self.c1, self.c2)
            return s if k is None else s.masked_fill(~tree.legal, float("-inf"))
        logits = tree.logits[tree.rows, node]
        sig = self._sigma(tree, q, visited, prior, visits, tree.raw_value[tree.rows, node])
        if k is None:
            return scores.gumbel_interior_scores(logits + sig, visits)
        score = root.gumbel + logits + sig
        due = root.considered & (visits == root.schedule[:, k:k + 1])
        allowed = torch.where(due.any(-1, keepdim=True), due, root.considered)
        return score.masked_fill(~allowed, float("-inf"))

    def _sigma(self, tree: Tree, q: torch.Tensor, visited: torch.Tensor, prior: torch.Tensor,
               visits: torch.Tensor, raw_value: torch.Tensor) -> torch.Tensor:
        """Gumbel MuZero's ``sigma`` of the normalised completed action values ``[B, A]``."""
        completed = scores.completed_q(q, visited, prior, visits, raw_value)
        return scores.sigma(tree.normalise(completed, spread_free=0.0), visits, self.c_visit,
                            self.c_scale)

    # ------------------------------------------------------ expansion, backup
    def _expand_and_backup(self, model: SearchModel, tree: Tree, path: Path,
                           parent: torch.Tensor, action: torch.Tensor, index: int) -> None:
        """One model call adds node ``index`` below ``parent`` by ``action`` in every tree,
        then its value is backed up along the path (MuZero's ``backpropagate``)."""
        latent, reward, logits, value = model.recurrent_inference(
            tree.latent[tree.rows, parent], action)
        dtype = tree.value_sum.dtype
        tree.write(index, latent, logits.to(dtype), value.to(dtype), reward.to(dtype))
        tree.children[tree.rows, parent, action] = index
        leaf = torch.full_like(parent, index)
        ret = value.to(dtype)
        everyone = torch.ones_like(parent, dtype=torch.bool)
        for depth, (node, on_path) in enumerate([(leaf, everyone)] + path[::-1]):
            is_root = depth == len(path)
            mask = on_path.to(dtype)
            tree.value_sum[tree.rows, node] += mask * ret
            tree.visits[tree.rows, node] += mask
            r = tree.reward[tree.rows, node]
            if not is_root:
                mean = tree.value_sum[tree.rows, node] / tree.visits[tree.rows, node].clamp(min=1)
                tree.update_min_max(r + self.discount * self.sign * mean, on_path)
            ret = torch.where(on_path, r + self.discount * self.sign * ret, ret)

    # ---------------------------------------------------------------- result
    def _result(self, tree: Tree, root: Optional[GumbelRoot], generator: Optional[torch.Generator],
                temperature: Optional[float]) -> SearchResult:
        """The action, policy, value and root statistics of every tree."""
        node = torch.zeros_like(tree.rows)
        visits, visited, q = tree.children_stats(node, self.discount, self.sign)
        value = tree.value_sum[:, 0] / tree.visits[:, 0].clamp(min=1)
        q_out = torch.where(visited & tree.legal, q, value.unsqueeze(-1))
        if self.gumbel:
            logits, prior = tree.logits[:, 0], tree.prior[:, 0]
            improved = logits + self._sigma(tree, q, visited, prior, visits, tree.raw_value[:, 0])
            policy = torch.softmax(improved, dim=-1)
            most = root.considered & (visits == torch.where(
                root.considered, visits, -1).max(-1, keepdim=True).values)
            act = (root.gumbel + improved).masked_fill(~most, float("-inf")).argmax(-1)
        else:
            policy = visits / visits.sum(-1, keepdim=True)
            act = self._visit_action(visits, generator, temperature)
        return SearchResult(action=act, policy=policy, value=value, q_values=q_out,
                            visit_counts=visits, prior=tree.prior[:, 0].clone())

    def _visit_action(self, visits: torch.Tensor, generator: Optional[torch.Generator],
                      temperature: Optional[float]) -> torch.Tensor:
        """The most visited action (temperature 0), else one drawn from ``N^(1/T)``."""
        t = self.temperature if temperature is None else float(temperature)
        if t == 0:
            return visits.argmax(-1)
        p = (visits / visits.max(-1, keepdim=True).values) ** (1.0 / t)
        return torch.multinomial(p, 1, generator=generator).squeeze(-1)
