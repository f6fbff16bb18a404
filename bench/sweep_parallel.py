"""K parallel sweep trials against the same trials back to back (issue 21's bar: <= 1.15x).

    python bench/sweep_parallel.py                      # sac_pendulum.gin, 2 trials, 2 rounds
    python bench/sweep_parallel.py --conf ppo_cart_pole.gin --num_env_steps 60000

Times whole ``python -m alf.bin.sweep`` commands over the same 2 seeds of a shortened
example: ``--parallel=1`` (the two runs back to back, each with the whole machine) and
``--parallel=2`` (both at once, each pinned to half the CPUs). Rounds alternate the order.
Also times the two runs started side by side *without* the sweep (two plain
``alf.bin.train`` commands, unpinned) for reference. Prints a markdown table and writes
``bench/results/sweep_parallel.json``. The machine must otherwise be idle: note ``uptime``.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _timed(cmds: List[List[str]]) -> float:
    """Wall seconds until every command (started together) has exited 0."""
    start = time.perf_counter()
    procs = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for c in cmds]
    for p, c in zip(procs, cmds):
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"failed ({p.returncode}): {' '.join(c)}\n{err.decode()[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conf", default="sac_pendulum.gin")
    p.add_argument("--num_env_steps", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    shorten = ["--conf_param", f"TrainerConfig.num_env_steps={args.num_env_steps}",
               "--conf_param", "TrainerConfig.evaluate=False"]
    work = tempfile.mkdtemp(prefix="alf_sweep_bench_")
    rows = {"back to back (--parallel=1)": [], "parallel (--parallel=2)": [],
            "side by side, no sweep (unpinned)": []}

    def sweep(parallel: int, tag: str) -> float:
        study = os.path.join(work, tag)
        shutil.rmtree(study, ignore_errors=True)
        return _timed([[sys.executable, "-m", "alf.bin.sweep", f"--conf={args.conf}",
                        f"--study_dir={study}", "--seeds=0,1", f"--parallel={parallel}",
                        "--metric=train_return"] + shorten])

    def plain(tag: str) -> float:
        return _timed([[sys.executable, "-m", "alf.bin.train", f"--conf={args.conf}",
                        f"--root_dir={os.path.join(work, tag, str(seed))}", "--quiet",
                        "--conf_param", f"TrainerConfig.random_seed={seed}"] + shorten
                       for seed in (0, 1)])

    for r in range(args.rounds):
        order = ["seq", "par", "plain"] if r % 2 == 0 else ["plain", "par", "seq"]
        for kind in order:
            tag = f"{kind}{r}"
            if kind == "seq":
                rows["back to back (--parallel=1)"].append(sweep(1, tag))
            elif kind == "par":
                rows["parallel (--parallel=2)"].append(sweep(2, tag))
            else:
                shutil.rmtree(os.path.join(work, tag), ignore_errors=True)
                rows["side by side, no sweep (unpinned)"].append(plain(tag))
            print(f"round {r} {kind}: {[round(v[-1], 1) for v in rows.values() if v]}",
                  file=sys.stderr)
    base = sum(rows["back to back (--parallel=1)"]) / args.rounds
    print(f"\n{args.conf}, {args.num_env_steps:,} env steps x 2 seeds, {args.rounds} rounds "
          f"(load: {os.getloadavg()[0]:.2f})\n")
    print("| how | wall s (rounds) | over back to back |\n|---|---:|---:|")
    for name, times in rows.items():
        mean = sum(times) / len(times)
        print(f"| {name} | {mean:.1f} ({', '.join(f'{t:.1f}' for t in times)}) | "
              f"{mean / base:.2f}x |")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "sweep_parallel.json"), "w") as f:
        json.dump({"conf": args.conf, "num_env_steps": args.num_env_steps, "rows": rows}, f,
                  indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
