"""Tree-search simulations per second: alf's batched ``TreeSearch`` against the plain
Python per-env ``ReferenceSearch`` (one tree of node objects per env), same rules.

    python bench/mcts_speed.py                                  # B = 1, 16, 64; 50 simulations
    python bench/mcts_speed.py --device cuda --repeats 5
    python bench/mcts_speed.py --batch_sizes 2 --simulations 3 --repeats 1 --hidden 8   # smoke

What is timed: one search of ``B`` roots (``search(model, obs[B])``) with a tiny
MuZero-shaped MLP model (representation, dynamics with a reward head, prediction;
``--hidden`` wide, ``--actions`` actions), no Dirichlet noise (the reference would need
the same draws), temperature 0. The reference searches the ``B`` envs one after the
other, calling the same model with batch 1, as a per-env MCTS does. Rate = ``B *
simulations / seconds`` (best and median over ``--repeats`` after one warm-up search);
CUDA is synchronised before the clock stops. Also printed: whether both built the
same trees (visit counts; float32 near-ties may split them, it is a sanity line, not a
test: tests/planning compares them exactly in float64). ``--json PATH`` writes the rows.
"""
import argparse
import json
import statistics
import sys
import time
from typing import Dict, List

import torch
from torch import nn

from alf.planning.reference_search import ReferenceSearch
from alf.planning.tree_search import TreeSearch


class TinyMuZeroModel(nn.Module):
    """MLPs: ``h(obs) -> latent``, ``g(latent, onehot a) -> (latent, reward)``,
    ``f(latent) -> (logits, value)``; the
    :class:`alf.planning.search_model.SearchModel` protocol."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: int):
        super().__init__()
        self.num_actions = num_actions
        mlp = lambda i, o: nn.Sequential(nn.Linear(i, hidden), nn.ReLU(),  # noqa: E731
                                         nn.Linear(hidden, o))
        self.h = mlp(obs_dim, hidden)
        self.g = mlp(hidden + num_actions, hidden + 1)
        self.f = mlp(hidden, num_actions + 1)

    def _predict(self, latent):
        out = self.f(latent)
        return out[:, :-1], out[:, -1]

    def initial_inference(self, obs):
        latent = torch.tanh(self.h(obs))
        return (latent,) + self._predict(latent)

    def recurrent_inference(self, latent, action):
        onehot = nn.functional.one_hot(action, self.num_actions).to(latent.dtype)
        out = self.g(torch.cat([latent, onehot], -1))
        nxt = torch.tanh(out[:, :-1])
        return (nxt, out[:, -1]) + self._predict(nxt)


def _clock(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure(batch: int, simulations: int, repeats: int, hidden: int, actions: int,
            device: torch.device, selection: str = "visit_count") -> Dict:
    """One row: simulations per second of both searches for ``batch`` roots."""
    torch.manual_seed(0)
    model = TinyMuZeroModel(8, actions, hidden).to(device).eval()
    obs = torch.randn(batch, 8, device=device)
    kw = dict(num_simulations=simulations, action_selection=selection,
              root_exploration_fraction=0.0)
    batched = TreeSearch(temperature=0.0, gumbel_scale=0.0, **kw)
    reference = ReferenceSearch(**kw)
    out: Dict[str, List] = {"batched": [], "reference": []}
    run_b = lambda: out.__setitem__("last_b", batched.search(model, obs))  # noqa: E731
    run_r = lambda: out.__setitem__("last_r", [  # noqa: E731
        reference.search(model, obs[b:b + 1]) for b in range(batch)])
    with torch.no_grad():
        run_b(), run_r()  # warm-up
        for _ in range(repeats):
            out["batched"].append(batch * simulations / _clock(run_b, device))
            out["reference"].append(batch * simulations / _clock(run_r, device))
    same = sum(out["last_b"].visit_counts[b].tolist() == out["last_r"][b]["visits"]
               for b in range(batch))
    row = {"batch": batch, "simulations": simulations, "device": str(device),
           "selection": selection, "same_trees": f"{same}/{batch}"}
    for side in ("batched", "reference"):
        row[f"{side}_best"] = max(out[side])
        row[f"{side}_median"] = statistics.median(out[side])
    row["speedup_median"] = row["batched_median"] / row["reference_median"]
    return row


def main(argv=None) -> List[Dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--simulations", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--actions", type=int, default=4)
    p.add_argument("--selection", choices=["visit_count", "gumbel"], default="visit_count")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--json", default="", help="also write the rows here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rows = [measure(b, args.simulations, args.repeats, args.hidden, args.actions, device,
                    args.selection) for b in args.batch_sizes]
    print(f"| B | sims | batched sims/s (median, best) | reference sims/s (median, best) "
          f"| speedup | same trees |  ({device}, {args.selection}, {args.threads} threads)")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['simulations']} | {r['batched_median']:.0f}, "
              f"{r['batched_best']:.0f} | {r['reference_median']:.0f}, {r['reference_best']:.0f}"
              f" | {r['speedup_median']:.1f}x | {r['same_trees']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
