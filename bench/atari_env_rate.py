"""Raw Atari env rate: random-action agent steps/s per backend, with and without alf.

    python bench/atari_env_rate.py [--envs 8] [--steps 2000] [--game ALE/Breakout-v5]
        [--backends ale_vector sync async envpool] [--threads 0] [--json [PATH]]

The "raw env rate ceiling" of the Atari issue: how fast can each backend
produce preprocessed Breakout frames (84x84 grey, frame skip 4, no-op and
fire reset, life-loss discount: the default ``AtariOptions``) for ``--envs``
environments driven by uniformly random actions (drawn before timing).

For every backend two lines are timed, interleaved in rounds so that load
from other processes hits both alike:

* ``alf``: ``create_environment(game, envs, backend=...).step(actions)``,
  i.e. including alf's TimeStep conversion (torch tensors, step types,
  life-loss discount);
* ``raw``: the very same engine stepped directly with numpy actions, no alf
  (``env.gym_env`` - ``AtariVectorEnv``, ``SyncVectorEnv``,
  ``AsyncVectorEnv`` - or the envpool pool itself). Both lines step the same
  env object, so alf's episode bookkeeping sees stale state after raw
  rounds; that changes no timing, only the (discarded) TimeStep contents.

Columns: agent steps/s (``envs`` x vector steps / s), frames/s (agent steps
x ``frame_skip``: emulator frames), ``alf/raw`` and alf's overhead per
vector step in microseconds. ``--json`` writes the table to
``bench/results/atari_env_rate.json`` (or PATH).
"""
import argparse
import json
import os
import sys
import time
from typing import Dict, List

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from alf.environments import AtariOptions, create_environment  # noqa: E402
from alf.errors import UserError  # noqa: E402

_CLOCK = time.perf_counter
_DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                             "atari_env_rate.json")


def _raw_step_fn(env):
    """The engine under ``env`` as ``step(numpy_actions)``, bypassing alf."""
    gym_env = env.gym_env
    pool = getattr(gym_env, "pool", None)  # EnvPoolVectorEnv -> the envpool object itself
    return (pool if pool is not None else gym_env).step


def _time_steps(step, actions) -> float:
    t0 = _CLOCK()
    for a in actions:
        step(a)
    return _CLOCK() - t0


def bench_backend(game: str, backend: str, envs: int, steps: int, rounds: int,
                  warmup: int, seed: int) -> Dict[str, float]:
    """Agent steps/s of ``backend`` through alf and raw (see the module docstring)."""
    options = AtariOptions()
    t0 = _CLOCK()
    env = create_environment(game, envs, backend=backend, seed=seed, atari=options)
    try:
        env.reset()
        setup_s = _CLOCK() - t0
        n_actions = env.action_spec().num_actions
        gen = torch.Generator().manual_seed(seed)
        alf_actions = torch.randint(0, n_actions, (steps, envs), generator=gen)
        raw_actions = alf_actions.numpy().copy()
        raw_step = _raw_step_fn(env)
        for i in range(warmup):
            env.step(alf_actions[i % steps])
        per_round = max(1, steps // rounds)
        t_alf = t_raw = 0.0
        for r in range(rounds):
            sl = slice(r * per_round, (r + 1) * per_round)
            t_raw += _time_steps(raw_step, raw_actions[sl])
            t_alf += _time_steps(env.step, alf_actions[sl])
        n = per_round * rounds
    finally:
        env.close()
    raw_rate = n * envs / t_raw
    alf_rate = n * envs / t_alf
    return {
        "backend": backend, "envs": envs, "vector_steps": n, "setup_s": setup_s,
        "raw_agent_steps_per_s": raw_rate, "raw_frames_per_s": raw_rate * options.frame_skip,
        "alf_agent_steps_per_s": alf_rate, "alf_frames_per_s": alf_rate * options.frame_skip,
        "alf_over_raw": alf_rate / raw_rate,
        "alf_overhead_us_per_vector_step": (t_alf - t_raw) / n * 1e6,
    }


def _print_table(rows: List[Dict[str, float]]) -> None:
    print(f"{'backend':<11} {'raw steps/s':>12} {'alf steps/s':>12} {'alf frames/s':>13} "
          f"{'alf/raw':>8} {'overhead us':>12} {'setup s':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['backend']:<11} skipped: {r['error']}")
            continue
        print(f"{r['backend']:<11} {r['raw_agent_steps_per_s']:>12,.0f} "
              f"{r['alf_agent_steps_per_s']:>12,.0f} {r['alf_frames_per_s']:>13,.0f} "
              f"{r['alf_over_raw']:>8.2f} {r['alf_overhead_us_per_vector_step']:>12.0f} "
              f"{r['setup_s']:>8.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, default=8, help="parallel environments per backend")
    p.add_argument("--steps", type=int, default=2000, help="timed vector steps per line")
    p.add_argument("--game", default="ALE/Breakout-v5")
    p.add_argument("--backends", nargs="+", default=["ale_vector", "sync", "async", "envpool"])
    p.add_argument("--rounds", type=int, default=4, help="raw/alf interleaving rounds")
    p.add_argument("--warmup", type=int, default=50, help="untimed vector steps first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0,
                   help="C++ threads for ale_vector/envpool (0: their default)")
    p.add_argument("--json", nargs="?", const=_DEFAULT_JSON, default=None,
                   help=f"write the results as JSON (default path: {_DEFAULT_JSON})")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.threads:
        import gin  # pylint: disable=import-outside-toplevel
        gin.parse_config(f"ale_vector_env_backend.num_threads = {args.threads}\n"
                         f"envpool_env_backend.num_threads = {args.threads}")
    rows = []
    for backend in args.backends:
        try:
            rows.append(bench_backend(args.game, backend, args.envs, args.steps, args.rounds,
                                      args.warmup, args.seed))
        except UserError as e:  # e.g. envpool not installed
            rows.append({"backend": backend, "error": str(e).splitlines()[0]})
        print(f"done: {backend}", file=sys.stderr, flush=True)
    print(f"{args.game}, {args.envs} envs, {args.steps} vector steps per line, random actions, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, numpy {np.__version__}")
    _print_table(rows)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"game": args.game, "envs": args.envs, "steps": args.steps,
                       "cpus": os.cpu_count(), "results": rows}, f, indent=1)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
