"""alf PPO vs SB3 PPO on CartPole-v1, same hyper-parameters, same run, same machine.

    python bench/ppo_cart_pole.py --seeds 0 1 2

For each seed runs ``python -m alf.bin.train --conf=ppo_cart_pole.gin`` and
``bench/sb3_ppo_cart_pole.py`` one after the other (never concurrently) and
reports, per seed, the wall-clock seconds and env steps at which the 20-episode
mean training return first reached 475, the total time for 100k env steps, and
alf/SB3 ratios (target: alf <= 0.7x SB3's time-to-475). Results are written to
``bench/results/ppo_cart_pole.json``.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_alf(seed: int, steps: int, target: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "alf.bin.train", "--conf=ppo_cart_pole.gin", f"--root_dir={d}",
               "--quiet", "--conf_param", f"TrainerConfig.random_seed={seed}",
               "--conf_param", f"TrainerConfig.num_env_steps={steps}",
               "--conf_param", "TrainerConfig.evaluate=False"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        process_s = time.perf_counter() - t0
        hit = None
        total = None
        with open(os.path.join(d, "progress.csv")) as f:
            for row in csv.DictReader(f):
                total = float(row["wall_time_s"])
                if hit is None and row["average_return"] and float(row["average_return"]) >= target:
                    hit = (float(row["wall_time_s"]), int(row["env_steps"]))
    return {"peer": "alf", "seed": seed, "total_s": total, "process_s": process_s, "steps": steps,
            "hit_s": hit[0] if hit else None, "hit_steps": hit[1] if hit else None}


def run_sb3(seed: int, steps: int, target: float) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "sb3_ppo_cart_pole.py"), f"--seed={seed}",
           f"--steps={steps}", f"--target={target}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--target", type=float, default=475.0)
    args = p.parse_args()
    rows = []
    for seed in args.seeds:
        a = run_alf(seed, args.steps, args.target)
        s = run_sb3(seed, args.steps, args.target)
        rows += [a, s]
        ratio = (a["hit_s"] / s["hit_s"]) if a["hit_s"] and s["hit_s"] else None
        print(f"seed {seed}: alf reached {args.target:g} at {a['hit_steps']} steps / "
              f"{_f(a['hit_s'])} s (100k in {a['total_s']:.1f} s); SB3 at {s['hit_steps']} steps / "
              f"{_f(s['hit_s'])} s (100k in {s['total_s']:.1f} s); time-to-target ratio alf/SB3 "
              f"{_f(ratio, 2)}; throughput ratio {a['total_s'] / s['total_s']:.2f}", flush=True)
    alf_hits = [r["hit_s"] for r in rows if r["peer"] == "alf" and r["hit_s"]]
    sb3_hits = [r["hit_s"] for r in rows if r["peer"] == "sb3" and r["hit_s"]]
    summary = {
        "alf_reached": f"{len(alf_hits)}/{len(args.seeds)}",
        "sb3_reached": f"{len(sb3_hits)}/{len(args.seeds)}",
        "alf_median_hit_s": statistics.median(alf_hits) if alf_hits else None,
        "sb3_median_hit_s": statistics.median(sb3_hits) if sb3_hits else None,
        "alf_median_total_s": statistics.median(r["total_s"] for r in rows if r["peer"] == "alf"),
        "sb3_median_total_s": statistics.median(r["total_s"] for r in rows if r["peer"] == "sb3"),
    }
    if alf_hits and sb3_hits:
        summary["ratio_of_median_time_to_target"] = (summary["alf_median_hit_s"]
                                                     / summary["sb3_median_hit_s"])
        per_seed = [a["hit_s"] / s["hit_s"] for a, s in zip(rows[0::2], rows[1::2])
                    if a["hit_s"] and s["hit_s"]]
        summary["median_per_seed_time_to_target_ratio"] = statistics.median(per_seed)
        summary["alf_median_hit_env_steps"] = statistics.median(
            r["hit_steps"] for r in rows if r["peer"] == "alf" and r["hit_steps"])
        summary["sb3_median_hit_env_steps"] = statistics.median(
            r["hit_steps"] for r in rows if r["peer"] == "sb3" and r["hit_steps"])
    summary["median_total_time_ratio"] = summary["alf_median_total_s"] / summary["sb3_median_total_s"]
    print(json.dumps(summary, indent=1))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "ppo_cart_pole.json"), "w") as f:
        json.dump({"runs": rows, "summary": summary}, f, indent=1)


def _f(x, nd=1):
    return "n/a" if x is None else f"{x:.{nd}f}"


if __name__ == "__main__":
    main()
