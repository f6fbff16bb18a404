"""Overlay the learning curves of several ``bench/learning_curves.py`` results.

    python bench/compare_curves.py --out docs/images/ppo_cart_pole_ranks.png \
        --title "PPO CartPole: 1 rank vs 2 ranks" \
        "1 rank x 8 envs=bench/results/ppo_cart_pole.json" \
        "2 ranks x 8 envs=bench/results/ppo_cart_pole_2ranks.json" \
        "2 ranks x 4 envs=bench/results/ppo_cart_pole_2ranks_4envs.json"

Each ``LABEL=PATH`` is one result file (one colour, one line per seed; env steps on
the x axis are the run's, summed over ranks); the target of the first file is drawn.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="LABEL=PATH of a learning_curves.py json")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="")
    args = p.parse_args()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    target = None
    for i, item in enumerate(args.results):
        label, path = item.split("=", 1)
        with open(path) as f:
            data = json.load(f)
        target = data["target"] if target is None else target
        for k, run in enumerate(data["runs"]):
            xs, ys = zip(*run["curve"]) if run["curve"] else ([], [])
            ax.plot(xs, ys, color=f"C{i}", alpha=0.8, linewidth=1.2,
                    label=label if k == 0 else None)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set_xlabel("env steps (all ranks)")
    ax.set_ylabel("average training return")
    ax.set_title(args.title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
