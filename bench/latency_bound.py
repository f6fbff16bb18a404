"""Throughput against the latency bound: an env whose step waits (sleeps) rather than computes.

    python bench/latency_bound.py                                   # 32 envs x 10 ms: bound 3,200/s
    python bench/latency_bound.py --policy_workers 0 1 --rounds 2
    python bench/latency_bound.py --env_steps 3000 --workers 1 2 --out /tmp/lb.json  # smoke

Like a remote simulator, a game engine ticking at a fixed rate or a robot, each step of
CartPole waits ``--latency_ms`` (``StepLatencyWrapper``); the CPU is free meanwhile.
With ``--num_envs`` envs all waiting at once the bound is ``num_envs / latency`` agent
steps/s. Every row runs the real ``python -m alf.bin.train --conf=appo_cart_pole.gin``
(APPO, a 64x64 MLP learner: cheap, so the envs' waits are what bind) in a fresh temp
``--root_dir``:

- sync unroll (``TrainerConfig.async_unroll=False``) with each env backend that applies
  gym wrappers (``sync``: the envs wait one after another; ``async``: one subprocess
  per env, all wait at once); the best is the sync headline;
- async unroll (processes mode) with ``--workers`` env workers x ``--groups`` env groups
  each, with each of ``--worker_backends`` inside the workers;
- with ``--policy_workers N ...``: the async rows again with
  ``TrainerConfig.num_policy_workers=N`` (not passed at all without the option).

The ``async`` backend forks its env processes (``async_env_backend.context="fork"``):
env workers are started with ``spawn``, and a spawned process's default start method is
``spawn``, so each of its env processes would import torch and alf again (a worker's
32 envs took ~50 s on 2 busy cores, past ``TrainerConfig.env_worker_timeout_s``;
forked: under a second). The vector backend (CartPole's native vector env) is not a
row: it has no per-env envs to wrap, and refuses gym wrappers.

Speed: agent steps/s from ``progress.csv`` between the end of warm-up iteration
``--warmup`` and the last row (``bench/train_runs.py``). Each row also gets the
ceiling of its process model (a process with the ``sync`` backend waits for its envs
one after another: ``processes / latency``), the learner's share of the measured time
(near 100%: training binds, not the envs) and the async policy lag. A row runs
``--env_steps`` env steps or ``--max_seconds`` at its ceiling, whichever is fewer.
``--rounds`` alternate the rows; medians are reported. Writes ``--out``
(``bench/results/latency_bound.json``) and prints a markdown table.
"""
import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_runs import (agent_steps_per_s, last_async_lag, learner_share,  # noqa: E402
                        progress_rows, run_train)

CONF = ["--conf=appo_cart_pole.gin"]


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration: sync unroll (``workers == 0``) or async with ``workers`` env workers."""
    backend: str
    workers: int = 0
    policy_workers: Optional[int] = None  # None: TrainerConfig.num_policy_workers not set

    @property
    def name(self) -> str:
        if not self.workers:
            return "sync unroll"
        text = f"async, {self.workers} env worker{'s' if self.workers > 1 else ''}"
        if self.policy_workers is not None:
            plural = "" if self.policy_workers == 1 else "s"
            text += f", {self.policy_workers} policy worker{plural}"
        return text

    def params(self, groups: int) -> List[str]:
        """The row's own ``--conf_param`` bindings."""
        out = [f'create_environment.backend="{self.backend}"']
        if self.backend == "async":  # env workers are spawned, and would spawn their envs
            out.append('async_env_backend.context="fork"')
        if not self.workers:
            return out + ["TrainerConfig.async_unroll=False"]
        out += [f"TrainerConfig.num_env_workers={self.workers}",
                f"TrainerConfig.env_groups_per_worker={groups}"]
        if self.policy_workers is not None:
            out.append(f"TrainerConfig.num_policy_workers={self.policy_workers}")
        return out

    def ceiling(self, num_envs: int, latency_s: float) -> float:
        """Agent steps/s the process model allows: with the ``sync`` backend each process
        (the learner's, or each env worker) waits for its envs one after another."""
        return (max(1, self.workers) if self.backend == "sync" else num_envs) / latency_s


def make_rows(args: argparse.Namespace) -> List[Row]:
    rows = [Row(b) for b in args.sync_backends]
    for pw in (args.policy_workers if args.policy_workers is not None else [None]):
        rows += [Row(b, w, pw) for b in args.worker_backends for w in args.workers]
    for w in args.workers:
        if args.num_envs % (w * args.groups):
            raise SystemExit(f"--num_envs {args.num_envs} is not a multiple of {w} workers x "
                             f"{args.groups} groups")
    return rows


def measure(row: Row, args: argparse.Namespace, root: str) -> dict:
    """One training run of ``row``: its speed, learner share and lag."""
    latency_s = args.latency_ms / 1000
    per_iter = args.num_envs * args.unroll_length
    wanted = min(args.env_steps, row.ceiling(args.num_envs, latency_s) * args.max_seconds)
    iters = max(args.warmup + 1, math.ceil(wanted / per_iter))
    run_dir = tempfile.mkdtemp(prefix="run_", dir=root)
    params = ["create_environment.gym_wrappers=[@StepLatencyWrapper]",
              f"StepLatencyWrapper.latency_s={latency_s}",
              f"create_environment.num_parallel_environments={args.num_envs}",
              f"TrainerConfig.unroll_length={args.unroll_length}",
              f"TrainerConfig.num_env_steps={iters * per_iter}",
              "TrainerConfig.summary_interval=1", "TrainerConfig.evaluate=False",
              "TrainerConfig.checkpoint_interval=1000000",
              "TrainerConfig.progress_interval_seconds=1000000",
              *row.params(args.groups), *args.conf_param]
    output = run_train(CONF, run_dir, params)
    rows = progress_rows(run_dir)
    last = max(rows)
    return {"agent_steps_per_s": agent_steps_per_s(rows, args.warmup, last),
            "env_steps": int(rows[last]["env_steps"]),
            "learner_share": learner_share(run_dir, rows, args.warmup, last),
            "lag": last_async_lag(output)}


def load() -> str:
    """``uptime``'s line (the load averages), or ``os.getloadavg()``."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def markdown(results: List[dict], bound: float) -> str:
    lines = ["| run | env backend | process-model ceiling | agent steps/s | % of bound "
             "| learner share | lag min/avg/max |", "|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        share = "" if r["learner_share"] is None else f"{100 * r['learner_share']:.0f}%"
        lag = "" if r["lag"] is None else "/".join(str(x) for x in r["lag"])
        lines.append(f"| {r['run']} | {r['backend']} | {r['ceiling']:,.0f} | "
                     f"{r['agent_steps_per_s']:,.0f} | {100 * r['agent_steps_per_s'] / bound:.0f}% "
                     f"| {share} | {lag} |")
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--latency_ms", type=float, default=10.0, help="sleep per env step")
    p.add_argument("--num_envs", type=int, default=32)
    p.add_argument("--unroll_length", type=int, default=32)
    p.add_argument("--env_steps", type=int, default=40000, help="per row, at most")
    p.add_argument("--max_seconds", type=float, default=60.0,
                   help="fewer env steps for a row whose ceiling would make it longer")
    p.add_argument("--warmup", type=int, default=2, help="iterations not timed")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--groups", type=int, default=2, help="TrainerConfig.env_groups_per_worker")
    p.add_argument("--policy_workers", type=int, nargs="+", default=None,
                   help="also the async rows with TrainerConfig.num_policy_workers=N, each N")
    p.add_argument("--sync_backends", nargs="*", default=["sync", "async"])
    p.add_argument("--worker_backends", nargs="+", default=["sync", "async"],
                   help="create_environment.backend inside the env workers")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--conf_param", action="append", default=[], help="for every row")
    p.add_argument("--out", default=os.path.join(HERE, "results", "latency_bound.json"))
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    rows = make_rows(args)
    bound = args.num_envs / (args.latency_ms / 1000)
    start_load = load()
    print(f"[latency_bound] start: {start_load}\n[latency_bound] {args.num_envs} envs x "
          f"{args.latency_ms:g} ms: bound {bound:,.0f} agent steps/s", flush=True)
    root = tempfile.mkdtemp(prefix="alf_latency_bound_")
    runs = {row: [] for row in rows}
    for r in range(args.rounds):
        for row in rows:
            out = measure(row, args, root)
            runs[row].append(out)
            print(f"round {r + 1}: {row.name} ({row.backend}): {out['agent_steps_per_s']:,.0f} "
                  f"agent steps/s over {out['env_steps']:,} env steps", flush=True)
    results = [{"run": row.name, "backend": row.backend, "env_workers": row.workers,
                "policy_workers": row.policy_workers,
                "ceiling": row.ceiling(args.num_envs, args.latency_ms / 1000),
                "agent_steps_per_s": statistics.median(o["agent_steps_per_s"] for o in outs),
                "all": [o["agent_steps_per_s"] for o in outs],
                "learner_share": outs[-1]["learner_share"], "lag": outs[-1]["lag"]}
               for row, outs in runs.items()]
    for r in results:
        r["fraction_of_bound"] = r["agent_steps_per_s"] / bound
    sync = [r for r in results if not r["env_workers"]]
    best_sync = max(sync, key=lambda r: r["agent_steps_per_s"]) if sync else None
    end_load = load()
    print(markdown(results, bound))
    if best_sync:
        print(f"\nsync, best backend: {best_sync['backend']} "
              f"({best_sync['agent_steps_per_s']:,.0f} agent steps/s)")
    print(f"[latency_bound] end: {end_load}")
    report = {"settings": vars(args), "bound_agent_steps_per_s": bound, "rows": results,
              "best_sync_backend": best_sync["backend"] if best_sync else None,
              "load_start": start_load, "load_end": end_load}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"[latency_bound] wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
