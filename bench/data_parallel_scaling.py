"""Env frames per second of a data-parallel run with 1, 2, ... ranks on this host.

    python bench/data_parallel_scaling.py --conf ppo_atari.gin --nprocs 1 2 \
        --env_steps 40960 --conf_param TrainerConfig.num_threads=1
    python bench/data_parallel_scaling.py --conf ppo_cart_pole.gin --nprocs 1 2 --env_steps 200000

Each configuration trains ``--env_steps`` run-wide env steps from scratch with
``torchrun --nproc_per_node=N`` (N = 1 runs ``python -m alf.bin.train`` directly),
and the throughput is read from rank 0's ``progress.csv``: env steps (summed over
ranks) per second of training, excluding start-up, between the first row and the
last. Every rank uses the config as is (per-rank envs, batch sizes), so N ranks
collect N times the steps per iteration; efficiency = FPS(N) / (N x FPS(1)).
Results go to ``bench/results/data_parallel_<conf>.json``.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from learning_curves import _free_port  # noqa: E402


def measure(conf: str, nproc: int, env_steps: int, params, root: str) -> dict:
    run_dir = os.path.join(root, f"n{nproc}")
    launcher = [sys.executable]
    if nproc > 1:
        launcher += ["-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
                     f"--master_port={_free_port()}"]
    cmd = launcher + ["-m", "alf.bin.train", f"--conf={conf}", f"--root_dir={run_dir}", "--quiet",
                      "--conf_param", f"TrainerConfig.num_env_steps={env_steps}",
                      "--conf_param", "TrainerConfig.evaluate=False",
                      "--conf_param", "TrainerConfig.summary_interval=1",
                      "--conf_param", "TrainerConfig.checkpoint_interval=100000"]
    for p in params:
        cmd += ["--conf_param", p]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    with open(os.path.join(run_dir, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    first, last = rows[0], rows[-1]
    steps = int(last["env_steps"]) - int(first["env_steps"])
    seconds = float(last["wall_time_s"]) - float(first["wall_time_s"])
    return {"nproc": nproc, "fps": steps / seconds, "env_steps": int(last["env_steps"]),
            "train_seconds": float(last["wall_time_s"]), "wall_seconds": wall,
            "final_return": float(last["average_return"] or "nan")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conf", required=True)
    p.add_argument("--nprocs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--env_steps", type=int, default=100_000)
    p.add_argument("--conf_param", action="append", default=[])
    p.add_argument("--root", default=None)
    args = p.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="alf_dp_")
    results = []
    for n in args.nprocs:
        r = measure(args.conf, n, args.env_steps, args.conf_param, root)
        results.append(r)
        base = results[0]["fps"] * n / results[0]["nproc"]
        print(f"{n} rank(s): {r['fps']:,.0f} env steps/s (efficiency {r['fps'] / base:.2f}), "
              f"{r['env_steps']:,} steps in {r['train_seconds']:.1f} s of training, "
              f"{r['wall_seconds']:.1f} s wall", flush=True)
    name = os.path.splitext(os.path.basename(args.conf))[0]
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"data_parallel_{name}.json"), "w") as f:
        json.dump({"conf": args.conf, "params": args.conf_param, "cpus": os.cpu_count(),
                   "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
