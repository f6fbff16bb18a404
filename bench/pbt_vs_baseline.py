"""PBT against the same members trained without it (issue 21's PBT bar).

    python bench/pbt_vs_baseline.py                     # 3 repeats, PPO CartPole, 4 members
    python bench/pbt_vs_baseline.py --repeats 1 --num_env_steps 40000 --interval 5000

For each repeat (``--seed`` 0, 1, 2: different member seeds and initial draws), runs
``python -m alf.bin.pbt`` twice on ``ppo_cart_pole.gin`` with 4 members whose initial
learning rates (``lr/LinearSchedule.start``) are spread over 1e-5..1e-2: with exploit and
explore, and with ``--noexploit`` (the same members, seeds and segments, no copying). At
every generation boundary (equal env steps) it compares the population's median score
(each member's greedy evaluation return at the segment's end, 10 episodes). Prints a
markdown table, writes ``bench/results/pbt_vs_baseline.json`` and plots
``docs/images/pbt_vs_baseline.png``. ``--root`` keeps the studies (default: a temp dir).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from statistics import median
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def medians(study_dir: str) -> Dict[int, float]:
    """end env steps -> median member score, from ``lineage.csv``."""
    by_end: Dict[int, List[float]] = {}
    with open(os.path.join(study_dir, "lineage.csv")) as f:
        for row in csv.DictReader(f):
            if row["score"]:
                by_end.setdefault(int(row["end_env_steps"]), []).append(float(row["score"]))
    return {end: median(scores) for end, scores in sorted(by_end.items())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--num_env_steps", type=int, default=100000)
    p.add_argument("--interval", type=int, default=10000)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--root", default=None)
    args = p.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="alf_pbt_bench_")
    results = {}
    for seed in range(args.repeats):
        for kind, flag in (("pbt", "--exploit"), ("baseline", "--noexploit")):
            study = os.path.join(root, f"{kind}_seed{seed}")
            cmd = [sys.executable, "-m", "alf.bin.pbt", "--conf=ppo_cart_pole.gin",
                   f"--study_dir={study}", "--param",
                   "lr/LinearSchedule.start=loguniform(1e-5, 1e-2)", "--population=4",
                   f"--interval={args.interval}", f"--num_env_steps={args.num_env_steps}",
                   f"--parallel={args.parallel}", f"--seed={seed}", flag]
            subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            results[f"{kind}_seed{seed}"] = medians(study)
            print(f"{kind} seed {seed}: {results[f'{kind}_seed{seed}']}", file=sys.stderr)
    ends = sorted(results["pbt_seed0"])
    print(f"\nmedian member score (greedy eval return) at equal env steps, "
          f"{args.repeats} repeats\n")
    print("| env steps | " + " | ".join(f"PBT / no PBT (seed {s})" for s in range(args.repeats))
          + " |\n|---:|" + "---:|" * args.repeats)
    for end in ends:
        cells = [f"{results[f'pbt_seed{s}'].get(end, float('nan')):.1f} / "
                 f"{results[f'baseline_seed{s}'].get(end, float('nan')):.1f}"
                 for s in range(args.repeats)]
        print(f"| {end:,} | " + " | ".join(cells) + " |")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "pbt_vs_baseline.json"), "w") as f:
        json.dump({k: {str(e): v for e, v in m.items()} for k, m in results.items()}, f,
                  indent=1)
    _plot(results, args.repeats)


def _plot(results: Dict[str, Dict[int, float]], repeats: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, color in (("pbt", "tab:blue"), ("baseline", "tab:gray")):
        for s in range(repeats):
            m = results[f"{kind}_seed{s}"]
            ax.plot(list(m), list(m.values()), color=color, marker=".", alpha=0.8,
                    label=("PBT" if kind == "pbt" else "same members, no PBT") if s == 0 else None)
    ax.set_xlabel("env steps")
    ax.set_ylabel("median member eval return")
    ax.set_title("PPO CartPole, 4 members, lr start over 1e-5..1e-2")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "docs", "images", "pbt_vs_baseline.png"), dpi=90)


if __name__ == "__main__":
    main()
