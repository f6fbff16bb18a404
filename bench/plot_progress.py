"""Plot average training return vs env steps from one or more runs' ``progress.csv``.

    python bench/plot_progress.py runs/hc_seed0 runs/hc_seed1 --out docs/images/ppo_halfcheetah.png \
        --title "PPO, HalfCheetah-v5"
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learning_curves import read_progress  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", help="root_dirs written by alf.bin.train")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="")
    p.add_argument("--labels", nargs="*", default=None)
    p.add_argument("--target", type=float, default=None)
    args = p.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, d in enumerate(args.run_dirs):
        steps, returns, _ = read_progress(os.path.join(d, "progress.csv"))
        label = args.labels[i] if args.labels and i < len(args.labels) else os.path.basename(d.rstrip("/"))
        ax.plot(steps, returns, label=label)
    if args.target is not None:
        ax.axhline(args.target, color="grey", linestyle="--", linewidth=1, label=f"target {args.target:g}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("average training return (20 episodes)")
    ax.set_title(args.title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
