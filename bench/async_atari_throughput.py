"""Training throughput on Atari Breakout: sync ``ppo_atari.gin`` vs async ``appo_atari.gin``.

    python bench/async_atari_throughput.py                  # 2 + 6 iterations each, 2 rounds
    python bench/async_atari_throughput.py --iters 10 --rounds 3 --extra 'TrainerConfig.num_threads=1'
    python bench/async_atari_throughput.py --variant 'learner thread=TrainerConfig.learner_thread=True' \
        --variant '1 policy worker=TrainerConfig.num_policy_workers=1'

Both run the real ``python -m alf.bin.train`` command with the shipped gin files and
the same network (Nature CNN shared by policy and value), env count (8), unroll length
(128), sample reuse (4 epochs of 256-sample mini-batches over each 1,024-step batch)
and torch threads; the only differences are the algorithm (PPO's GAE vs APPO's V-trace
targets, computed by one extra no-grad forward pass over the batch) and where the envs
step: in the learner's process (sync) or in an env worker process with two
double-buffered groups of 4 (async). The two commands alternate, ``--rounds`` times, so
load from other processes hits both alike.

Timed: agent steps/s between the end of warm-up iteration ``--warmup`` and the last
iteration, from ``progress.csv`` (one row per iteration; its wall-time column), so
process start-up, worker spawn and first-call costs are excluded. Also reported: the
policy lag of the async run (min/avg/max over its last progress line) and the raw
``ale_vector`` env rate with random actions (the ceiling; ``bench/atari_env_rate.py``).
Writes ``bench/results/async_atari_throughput.json``.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_runs import agent_steps_per_s, last_async_lag, progress_rows, run_train  # noqa: E402

RUNS = {
    "sync PPO (ppo_atari.gin)": ["--conf", "ppo_atari.gin"],
    "async APPO (appo_atari.gin)": ["--conf", "appo_atari.gin"],
}


def run_one(args, iters: int, warmup: int, extra) -> dict:
    """Run ``warmup + iters`` iterations; agent steps/s over the last ``iters``."""
    root = tempfile.mkdtemp(prefix="alf_async_bench_")
    params = [f"TrainerConfig.num_iterations={warmup + iters}", "TrainerConfig.num_env_steps=0",
              "TrainerConfig.summary_interval=1", "TrainerConfig.checkpoint_interval=1000000",
              "TrainerConfig.progress_interval_seconds=1000000", *extra]
    output = run_train(args, root, params)
    rows = progress_rows(root)
    return {"agent_steps_per_s": agent_steps_per_s(rows, warmup, warmup + iters),
            "lag": last_async_lag(output)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--extra", nargs="*", default=[],
                        help="--conf_param bindings for both runs")
    parser.add_argument("--async_extra", nargs="*", default=[],
                        help="--conf_param bindings for the async run only")
    parser.add_argument("--variant", action="append", default=[],
                        help="another async row, 'NAME=binding;binding': appo_atari.gin with "
                             "these --conf_param bindings, e.g. 'learner thread="
                             "TrainerConfig.learner_thread=True'; alternates with the others")
    parser.add_argument("--no_ceiling", action="store_true")
    args = parser.parse_args(argv)

    runs = dict(RUNS)
    variant_extra = {}
    for v in args.variant:
        label, bindings = v.split("=", 1)
        name = f"async APPO (appo_atari.gin), {label}"
        runs[name] = RUNS["async APPO (appo_atari.gin)"]
        variant_extra[name] = [b for b in bindings.split(";") if b]
    results = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, conf in runs.items():
            extra = (list(args.extra) + (list(args.async_extra) if "async" in name else [])
                     + variant_extra.get(name, []))
            out = run_one(conf, args.iters, args.warmup, extra)
            results[name].append(out)
            print(f"round {r + 1}: {name}: {out['agent_steps_per_s']:.1f} agent steps/s"
                  + (f", lag min/avg/max {out['lag']}" if out["lag"] else ""), flush=True)
    table = {}
    for name, outs in results.items():
        rates = [o["agent_steps_per_s"] for o in outs]
        table[name] = {"agent_steps_per_s": statistics.median(rates), "all": rates,
                       "frames_per_s": 4 * statistics.median(rates),
                       "lag": outs[-1]["lag"]}
    sync, async_ = (table[n]["agent_steps_per_s"] for n in RUNS)
    table["ratio_async_over_sync"] = async_ / sync
    for name in variant_extra:
        table[name]["ratio_over_sync"] = table[name]["agent_steps_per_s"] / sync
    if not args.no_ceiling:
        from atari_env_rate import bench_backend  # noqa: E402
        ceiling = bench_backend("ALE/Breakout-v5", "ale_vector", 8, 2000, 4, 100, 0)
        table["raw_ale_vector_8_envs"] = ceiling
    print(json.dumps(table, indent=2))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "async_atari_throughput.json"), "w") as f:
        json.dump(table, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
