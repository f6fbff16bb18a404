"""How much a busy machine slows alf: each example alone, two side by side, next to a busy loop.

    python bench/contention.py                            # every example class, this checkout
    python bench/contention.py --examples sac ppo --repeats 2
    python bench/contention.py --alf_root /tmp/alf_old    # another checkout (same venv)

Researchers run several seeds on one machine. A run that shares the CPUs with
another CPU-bound process should slow down by about its fair share (2x on 2
cores), not 10x. For every example class (PPO CartPole, SAC Pendulum, async SAC,
APPO Atari, IQL Pendulum), shortened to ~10-30 s of work, this times whole
``python -m alf.bin.train`` commands:

- **alone**: one run, nothing else running; run twice (seeds 0 and 1), so
  **back to back** is the sum of the two;
- **side by side**: the same two runs started together; the wall time until
  both have finished;
- **busy loop**: one run next to ``python -c "while True: pass"``.

Goals (issue 18): side by side <= 1.25x back to back; busy loop <= 2.5x alone.
Prints a markdown table (figures in seconds, and the two ratios) and writes
``bench/results/contention.json``. The machine must otherwise be idle: note
``uptime`` next to the figures. IQL needs a dataset: a 10k-step random Pendulum
dataset is exported once into the work directory (not timed).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name -> (conf file, overrides that shorten it to a fixed amount of work)
EXAMPLES: Dict[str, tuple] = {
    "ppo": ("ppo_cart_pole.gin", ["TrainerConfig.num_env_steps=50000",
                                  "TrainerConfig.evaluate=False"]),
    "sac": ("sac_pendulum.gin", ["TrainerConfig.num_env_steps=1500"]),
    "sac_async": ("sac_pendulum_async.gin", ["TrainerConfig.num_env_steps=3000"]),
    "appo_atari": ("appo_atari.gin", ["TrainerConfig.num_env_steps=16384",
                                      "TrainerConfig.evaluate=False"]),
    "iql": ("iql_pendulum.gin", ["TrainerConfig.num_iterations=3",
                                 "TrainerConfig.num_updates_per_train_iter=300",
                                 "TrainerConfig.evaluate=False"]),
}
BUSY_LOOP = [sys.executable, "-c", "while True: pass"]


def _env(alf_root: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = alf_root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _command(name: str, root_dir: str, seed: int, dataset: Optional[str]) -> List[str]:
    conf, overrides = EXAMPLES[name]
    params = list(overrides) + [f"TrainerConfig.random_seed={seed}"]
    if name == "iql":
        params.append(f"TrainerConfig.offline_buffer_dir='{dataset}'")
    cmd = [sys.executable, "-m", "alf.bin.train", f"--conf={conf}", f"--root_dir={root_dir}"]
    for p in params:
        cmd += ["--conf_param", p]
    return cmd


def _start(cmd: Sequence[str], env: Dict[str, str], log: str) -> subprocess.Popen:
    out = open(log, "w")
    return subprocess.Popen(list(cmd), env=env, stdout=out, stderr=subprocess.STDOUT,
                            cwd=os.path.dirname(log))


def _wait_all(procs: Sequence[subprocess.Popen], logs: Sequence[str], start: float) -> float:
    for p, log in zip(procs, logs):
        if p.wait() != 0:
            with open(log) as f:
                tail = f.read()[-2000:]
            raise SystemExit(f"run failed (exit {p.returncode}), {log}:\n{tail}")
    return time.perf_counter() - start


def _runs(name: str, seeds: Sequence[int], work: str, env: Dict[str, str],
          dataset: Optional[str], tag: str) -> float:
    """Start one run per seed at once; the wall seconds until all finished."""
    procs, logs = [], []
    start = time.perf_counter()
    for seed in seeds:
        root = os.path.join(work, f"{name}_{tag}_{seed}")
        shutil.rmtree(root, ignore_errors=True)
        log = root + ".log"
        logs.append(log)
        procs.append(_start(_command(name, root, seed, dataset), env, log))
    return _wait_all(procs, logs, start)


def _make_dataset(work: str, env: Dict[str, str]) -> str:
    out = os.path.join(work, "pendulum_random")
    if not os.path.exists(out):
        subprocess.run([sys.executable, "-m", "alf.bin.export_dataset", "--conf=sac_pendulum.gin",
                        f"--out={out}", "--collect_steps=10000", "--policy=random"],
                       env=env, check=True, stdout=subprocess.DEVNULL, cwd=work)
    return out


def measure(name: str, work: str, env: Dict[str, str], dataset: Optional[str],
            scenarios: Sequence[str]) -> Dict[str, float]:
    """alone (seed 0, then seed 1), side by side, next to a busy loop: wall seconds."""
    alone0 = _runs(name, [0], work, env, dataset, "alone")
    alone1 = _runs(name, [1], work, env, dataset, "alone")
    r = {"alone": (alone0 + alone1) / 2, "back_to_back": alone0 + alone1}
    if "side" in scenarios:
        r["side_by_side"] = _runs(name, [0, 1], work, env, dataset, "side")
        r["side_vs_back_to_back"] = r["side_by_side"] / r["back_to_back"]
    if "busy" in scenarios:
        busy = subprocess.Popen(BUSY_LOOP)
        try:
            time.sleep(0.5)
            r["busy_loop"] = _runs(name, [0], work, env, dataset, "busy")
        finally:
            busy.kill()
            busy.wait()
        r["busy_vs_alone"] = r["busy_loop"] / alone0
    return r


def _cell(r: Dict[str, float], key: str, fmt: str) -> str:
    return fmt.format(r[key]) if key in r else "-"


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=list(EXAMPLES))
    parser.add_argument("--alf_root", default=ROOT, help="the alf checkout to run")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--scenarios", nargs="*", default=["side", "busy"],
                        choices=["side", "busy"],
                        help="besides alone: side by side, next to a busy loop")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "contention.json"))
    args = parser.parse_args(argv)
    env = _env(os.path.abspath(args.alf_root))
    work = tempfile.mkdtemp(prefix="alf_contention_")
    load = os.getloadavg()
    print(f"alf: {args.alf_root}; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
          flush=True)
    results: Dict[str, List[Dict[str, float]]] = {}
    try:
        dataset = _make_dataset(work, env) if "iql" in args.examples else None
        print("| example | alone s | back to back s | side by side s | busy loop s "
              "| side / back to back | busy / alone |\n|---|---|---|---|---|---|---|", flush=True)
        for _ in range(args.repeats):
            for name in args.examples:
                r = measure(name, work, env, dataset, args.scenarios)
                results.setdefault(name, []).append(r)
                print(f"| {name} | {r['alone']:.1f} | {r['back_to_back']:.1f} | "
                      f"{_cell(r, 'side_by_side', '{:.1f}')} | {_cell(r, 'busy_loop', '{:.1f}')} | "
                      f"{_cell(r, 'side_vs_back_to_back', '{:.2f}x')} | "
                      f"{_cell(r, 'busy_vs_alone', '{:.2f}x')} |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"alf_root": args.alf_root, "load_before": load, "results": results}, f,
                  indent=1)
    print(f"load average after: {os.getloadavg()[0]:.2f}; wrote {args.out}")


if __name__ == "__main__":
    main()
