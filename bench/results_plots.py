"""One learning-curve plot per results row: each seed's curve, their IQM, and the peer's
published final value marked (``docs/images/results/<key>.png``)."""
import os
from typing import Dict, List

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from alf.studies.stats import iqm  # noqa: E402

from results_rows import Seed  # noqa: E402

GRID_POINTS = 100


def _on_grid(seeds: List[Seed], metric: str, grid: np.ndarray) -> np.ndarray:
    """``[R, G]``: each seed's curve interpolated on ``grid`` (NaN past its end)."""
    rows = []
    for s in seeds:
        c = s.train if metric == "train_return" else s.evaluation
        values = np.interp(grid, c.env_steps, c.values) if len(c) else np.full(len(grid),
                                                                              np.nan)
        if len(c):
            values[grid > c.env_steps[-1]] = np.nan
        rows.append(values)
    return np.asarray(rows)


def plot_row(row: Dict[str, str], seeds: List[Seed], path: str) -> None:
    """Write the plot of ``row`` (its protocol's metric) to ``path``."""
    metric = row["alf_metric"]
    budget = int(row["env_steps"])
    grid = np.linspace(0, budget, GRID_POINTS)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    curves = _on_grid(seeds, metric, grid) if seeds else np.zeros((0, GRID_POINTS))
    for s, values in zip(seeds, curves):
        ax.plot(grid, values, lw=0.8, alpha=0.45, label=f"alf seed {s.seed}")
    if len(curves):
        # IQM where every seed has a point (a still-running seed shortens the line)
        complete = ~np.isnan(curves).any(axis=0)
        if complete.any():
            ax.plot(grid[complete], iqm(curves[:, complete], axis=0), lw=2.2, color="black",
                    label=f"alf IQM over {len(seeds)} seeds")
    if row["peer_mean"]:
        mean, std = float(row["peer_mean"]), float(row["peer_std"] or 0.0)
        ax.axhline(mean, color="tab:red", ls="--", lw=1.2,
                   label=f"{row['peer']} at {budget:,}: {mean:,.0f}")
        ax.axhspan(mean - std, mean + std, color="tab:red", alpha=0.08)
    if row["zoo_mean"]:
        ax.axhline(float(row["zoo_mean"]), color="tab:purple", ls=":", lw=1.2,
                   label=f"rl-zoo (greedy eval): {float(row['zoo_mean']):,.0f}")
    label = ("training return (stochastic policy)" if metric == "train_return"
             else "greedy evaluation return")
    ax.set(xlabel="env steps", ylabel=label, xlim=(0, budget),
           title=f"{row['algorithm']} {row['env']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
