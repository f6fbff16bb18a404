"""The plots of ``alf.bin.compare`` (matplotlib, Agg backend: no display needed):

- ``curves.png``: each group's aggregate curve over the common grid with its confidence
  band (and the target, if any);
- ``profile.png``: performance profiles of the final scores: the fraction of a group's
  runs scoring above each threshold, with bootstrap bands (Agarwal et al. 2021, Fig. 4);
- ``aggregates.png``: median, IQM and mean of the final score and the AUC per group, each
  with its confidence interval as a bar (the interval plots of rliable).
"""
import os
from typing import List

from alf.studies.compare_analysis import Comparison
from alf.studies.compare_curves import X_LABELS
from alf.studies.stats import AGGREGATE_LABELS

CURVES, PROFILE, AGGREGATES = "curves.png", "profile.png", "aggregates.png"
_DPI = 110


def write_plots(comparison: Comparison, out_dir: str) -> List[str]:
    """Write the three plots into ``out_dir`` (which exists); returns their paths."""
    # deferred: matplotlib is optional and slow to import; only plotting needs it
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = [os.path.join(out_dir, name) for name in (CURVES, PROFILE, AGGREGATES)]
    for path, draw in zip(paths, (_curves, _profile, _aggregates)):
        fig = draw(plt, comparison)
        fig.tight_layout()
        fig.savefig(path, dpi=_DPI)
        plt.close(fig)
    return paths


def _curves(plt, comparison: Comparison):
    s = comparison.settings
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, g in enumerate(comparison.groups):
        ax.plot(comparison.grid, g.band.point, color=f"C{i}",
                label=f"{g.group.name} ({len(g.group.run_dirs)} runs)")
        ax.fill_between(comparison.grid, g.band.low, g.band.high, color=f"C{i}", alpha=0.25,
                        linewidth=0)
    if s.target is not None:
        ax.axhline(s.target, color="grey", linestyle="--", linewidth=1,
                   label=f"target {s.target:g}")
    ax.set_xlabel(X_LABELS[s.x])
    ax.set_ylabel(f"{s.metric} ({AGGREGATE_LABELS[s.aggregate]})")
    ax.set_title(f"{AGGREGATE_LABELS[s.aggregate]} over runs, {100 * s.confidence:g}% "
                 "bootstrap CI", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _profile(plt, comparison: Comparison):
    s = comparison.settings
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, g in enumerate(comparison.groups):
        ax.plot(comparison.taus, g.profile.point, color=f"C{i}", label=g.group.name)
        ax.fill_between(comparison.taus, g.profile.low, g.profile.high, color=f"C{i}",
                        alpha=0.25, linewidth=0)
    ax.set_xlabel(f"final {s.metric} (τ)")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Performance profile, {100 * s.confidence:g}% bootstrap CI", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _aggregates(plt, comparison: Comparison):
    s = comparison.settings
    scores = [("final", f"final {s.metric}"), ("auc", f"AUC of {s.metric}")]
    aggs = ("median", "iqm", "mean")
    names = [g.group.name for g in comparison.groups]
    fig, axes = plt.subplots(len(scores), len(aggs), squeeze=False,
                             figsize=(3.0 * len(aggs), 0.5 + (0.45 * len(names) + 0.9)
                                      * len(scores)))
    for row, (score, label) in enumerate(scores):
        for col, agg in enumerate(aggs):
            ax = axes[row][col]
            for i, g in enumerate(comparison.groups):
                iv = g.intervals[score][agg]
                ax.barh(i, iv.high - iv.low, left=iv.low, height=0.6, color=f"C{i}", alpha=0.6)
                ax.vlines(iv.point, i - 0.3, i + 0.3, color="black", linewidth=1.5)
            ax.set_yticks(range(len(names)))
            ax.set_yticklabels(names if col == 0 else [])
            ax.set_title(AGGREGATE_LABELS[agg] if row == 0 else "", fontsize=10)
            ax.set_xlabel(label, fontsize=8)
            ax.grid(axis="x", alpha=0.3)
    return fig
