"""Frames/s of the main-loop learner vs the learner thread (``TrainerConfig.learner_thread``),
side by side in one run, with the policy lag the thread introduces.

    python bench/learner_thread.py                      # ppo_atari, appo_atari, sac_halfcheetah
    python bench/learner_thread.py --confs sac_halfcheetah.gin --env_steps 3000 --pairs 3

For each conf, ``--pairs`` pairs of runs (main loop, then thread; alternating, so a
drift of the machine's speed hits both alike) of ``python -m alf.bin.train`` for
``--env_steps`` env steps each (agent steps; Atari frames are 4x that with frame
skip 4), in fresh run directories. Speed = env steps / training seconds from the
last row of each run's ``progress.csv`` (the Trainer's own clock, start-up
excluded); the lag is the last ``learner lag avg/max`` of the progress line (async
runs also show their own ``lag min/avg/max``). Writes ``bench/results/learner_thread.json``
and prints a markdown table (median of the pairs, ratio thread / main loop).
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CONFS = ["ppo_atari.gin", "appo_atari.gin", "sac_halfcheetah.gin"]
DEFAULT_STEPS = {"ppo_atari.gin": 12288, "appo_atari.gin": 12288, "sac_halfcheetah.gin": 4000}
# sac_halfcheetah collects 10k random steps first: start training after 1k here
EXTRA = {"sac_halfcheetah.gin": ["TrainerConfig.initial_collect_steps=1000"]}


def run_once(conf: str, env_steps: int, threaded: bool, root: str, extra) -> dict:
    """One training run; returns its speed (env steps/s) and the last lag notes."""
    run_dir = tempfile.mkdtemp(prefix="run_", dir=root)
    cmd = [sys.executable, "-m", "alf.bin.train", f"--conf={conf}", f"--root_dir={run_dir}",
           "--conf_param", f"TrainerConfig.num_env_steps={env_steps}",
           "--conf_param", "TrainerConfig.evaluate=False",
           "--conf_param", "TrainerConfig.progress_interval_seconds=2",
           "--conf_param", f"TrainerConfig.learner_thread={threaded}"]
    for cp in extra:
        cmd += ["--conf_param", cp]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}")
    with open(os.path.join(run_dir, "progress.csv")) as f:
        last = list(csv.DictReader(f))[-1]
    lines = [l for l in out.stdout.splitlines() if l.startswith("[alf] iter")]
    learner_lag = re.findall(r"learner lag ([\d.]+)/(\d+)", lines[-1]) if lines else []
    async_lag = re.findall(r"\| lag (\d+)/([\d.]+)/(\d+)", lines[-1]) if lines else []
    return {"env_steps": int(last["env_steps"]), "seconds": float(last["wall_time_s"]),
            "fps": int(last["env_steps"]) / float(last["wall_time_s"]),
            "learner_lag": learner_lag[0] if learner_lag else None,
            "async_lag": async_lag[0] if async_lag else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--confs", nargs="+", default=DEFAULT_CONFS)
    p.add_argument("--env_steps", type=int, default=None, help="per run (default: per conf)")
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="alf_learner_thread_")
    results = {}
    for conf in args.confs:
        steps = args.env_steps or DEFAULT_STEPS.get(conf, 5000)
        runs = {"main": [], "thread": []}
        for _ in range(args.pairs):
            for mode in ("main", "thread"):
                r = run_once(conf, steps, mode == "thread", root,
                             EXTRA.get(conf, []) + args.conf_param)
                runs[mode].append(r)
                print(f"{conf} {mode}: {r['fps']:.0f} env steps/s ({r['env_steps']} in "
                      f"{r['seconds']:.1f} s) learner lag {r['learner_lag']} async lag "
                      f"{r['async_lag']}", flush=True)
        results[conf] = runs
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "learner_thread.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("\n| example | main loop (env steps/s) | learner thread | thread / main | learner lag avg/max |")
    print("|---|---:|---:|---:|---|")
    for conf, runs in results.items():
        main_fps = statistics.median(r["fps"] for r in runs["main"])
        thr_fps = statistics.median(r["fps"] for r in runs["thread"])
        lags = [r["learner_lag"] for r in runs["thread"] if r["learner_lag"]]
        lag = "/".join(lags[-1]) if lags else "-"
        print(f"| {conf} | {main_fps:,.0f} | {thr_fps:,.0f} | {thr_fps / main_fps:.2f}x | {lag} |")


if __name__ == "__main__":
    main()
