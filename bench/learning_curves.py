"""Train an example for several seeds, report when each reached a target return, plot the curves.

    python bench/learning_curves.py --conf ac_cart_pole.gin --seeds 0 1 2 --target 475
    python bench/learning_curves.py --conf ppo_lstm_cart_pole.gin --seeds 0 --target 400
    python bench/learning_curves.py --conf ppo_cart_pole.gin --target 475 --nproc 2
    python bench/learning_curves.py --conf ppo_cart_pole.gin --target 475 --name ppo_cart_pole_learner_thread --conf_param TrainerConfig.learner_thread=True

Runs ``python -m alf.bin.train`` once per seed (sequentially), reads each run's
``progress.csv`` (average training return of the last 20 episodes vs env steps),
prints the first env step / wall-clock second at which the target was reached and
the final return, writes ``bench/results/<conf>.json`` and plots all seeds to
``docs/images/<conf>.png``. ``--root`` keeps the runs (default: a temp dir).
``--nproc N`` (N > 1) trains each seed data-parallel with N ranks on this machine
(``torchrun --nproc_per_node=N``); env steps are the run's, summed over ranks, and
results/plot are named ``<conf>_<N>ranks``.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_progress(path: str):
    steps, returns, times = [], [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["average_return"]:
                steps.append(int(row["env_steps"]))
                returns.append(float(row["average_return"]))
                times.append(float(row["wall_time_s"]))
    return steps, returns, times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conf", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--target", type=float, required=True)
    p.add_argument("--root", default=None, help="keep runs under this directory")
    p.add_argument("--conf_param", action="append", default=[])
    p.add_argument("--title", default=None)
    p.add_argument("--nproc", type=int, default=1, help="data-parallel ranks (torchrun)")
    p.add_argument("--name", default=None,
                   help="results/plot name (default: the conf's, e.g. ppo_cart_pole)")
    args = p.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="alf_curves_")
    name = args.name or os.path.splitext(os.path.basename(args.conf))[0]
    if args.nproc > 1:
        name += f"_{args.nproc}ranks"
    results = []
    for seed in args.seeds:
        run_dir = os.path.join(root, f"{name}_seed{seed}")
        launcher = [sys.executable]
        if args.nproc > 1:
            launcher += ["-m", "torch.distributed.run", f"--nproc_per_node={args.nproc}",
                         f"--master_port={_free_port()}"]
        cmd = launcher + ["-m", "alf.bin.train", f"--conf={args.conf}", f"--root_dir={run_dir}",
                          "--quiet", "--conf_param", f"TrainerConfig.random_seed={seed}"]
        for cp in args.conf_param:
            cmd += ["--conf_param", cp]
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL if args.nproc > 1 else None)
        steps, returns, times = read_progress(os.path.join(run_dir, "progress.csv"))
        hit = next(((s, t) for s, r, t in zip(steps, returns, times) if r >= args.target), None)
        res = {"seed": seed, "hit_env_steps": hit[0] if hit else None,
               "hit_seconds": hit[1] if hit else None, "final_return": returns[-1] if returns else None,
               "best_return": max(returns) if returns else None, "env_steps": steps[-1] if steps else 0,
               "seconds": times[-1] if times else None, "curve": list(zip(steps, returns))}
        results.append(res)
        print(f"{name} seed {seed}: reached {args.target:g} at "
              f"{res['hit_env_steps'] if hit else 'never'} env steps"
              f"{f' ({hit[1]:.1f} s)' if hit else ''}; final {res['final_return']:.1f}, best "
              f"{res['best_return']:.1f} after {res['env_steps']:,} steps in {res['seconds']:.0f} s",
              flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"{name}.json"), "w") as f:
        json.dump({"conf": args.conf, "target": args.target, "runs": results}, f)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install -e '.[plot]')")
        return
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for res in results:
        xs, ys = zip(*res["curve"]) if res["curve"] else ([], [])
        ax.plot(xs, ys, label=f"seed {res['seed']}")
    ax.axhline(args.target, color="grey", linestyle="--", linewidth=1, label=f"target {args.target:g}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("average training return (last TrainerConfig.metric_buffer_size episodes)", fontsize=8)
    ax.set_title(args.title or name)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.join(ROOT, "docs", "images"), exist_ok=True)
    out = os.path.join(ROOT, "docs", "images", f"{name}.png")
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
