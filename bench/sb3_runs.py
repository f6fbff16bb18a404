"""Stable-Baselines3 peers of alf's examples over seeds, logged so ``alf.bin.compare`` can
set them beside the alf runs (docs/benchmarks.md, "Seed studies").

    python bench/sb3_runs.py --algo ppo_cart_pole --seeds 0 1 2 3 4 \\
        --out runs/seeds/sb3_ppo_cart_pole --parallel 2 [--steps N]

``--algo`` names the alf example the peer mirrors: ``ppo_cart_pole`` (PPO),
``ac_cart_pole`` (A2C), ``dqn_cart_pole`` (DQN), ``sac_pendulum`` (SAC),
``ddpg_pendulum`` (DDPG). Its hyper-parameters are in bench/sb3_peers.py, each SB3
argument commented with the gin binding it mirrors and every mismatch stated (DQN: SB3
has no double Q).

Each seed trains in its own directory ``<out>/seed_<s>``:

- ``<i>.monitor.csv``: SB3's ``Monitor`` per training env (every finished episode);
- ``evaluations.npz``: ``EvalCallback``'s format (``timesteps``, ``results``,
  ``ep_lengths``): the greedy policy (``deterministic=True``) evaluated every
  ``--eval_every`` env steps, at an iteration boundary as alf does (the start of the next
  rollout, after training), and once more after the last training step;
- ``sb3.log`` (the run's output) and, once the run is done, ``finished.json`` (its
  settings and time). A directory with ``finished.json`` is skipped: rerunning the
  command does only the runs not finished (an unfinished one starts over).

Run length and evaluation default to the alf example's (bench/seed_plan.py reads its gin
file: ``num_env_steps``; ``eval_interval`` x env steps per iteration,
``num_eval_episodes`` over ``num_eval_environments`` envs, with the eval settings
bench/seed_benchmarks.py adds when the example evaluates too rarely), so both sides
evaluate at the same env steps. ``--parallel K`` runs K seeds at once, each a process
pinned to one of this process's CPUs with one torch thread.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time
from typing import List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sb3_peers import PEERS  # noqa: E402
from seed_plan import eval_plan  # noqa: E402

FINISHED = "finished.json"
EVALUATIONS = "evaluations.npz"
LOG = "sb3.log"


def greedy_eval_callback(eval_env, every: int, episodes: int, path: str):
    """An SB3 callback writing ``EvalCallback``'s ``evaluations.npz`` to ``path``: the
    greedy policy over ``episodes`` episodes at the first iteration boundary at or after
    each multiple of ``every`` env steps, and after training ends."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    class GreedyEval(BaseCallback):
        def __init__(self):
            super().__init__()
            self.timesteps: List[int] = []
            self.results: List[List[float]] = []
            self.lengths: List[List[int]] = []

        def _evaluate(self) -> None:
            returns, lengths = evaluate_policy(self.model, eval_env, n_eval_episodes=episodes,
                                               deterministic=True, return_episode_rewards=True)
            self.timesteps.append(self.num_timesteps)
            self.results.append(list(returns))
            self.lengths.append(list(lengths))
            tmp = path[:-len(".npz")] + ".tmp.npz"
            np.savez(tmp, timesteps=np.asarray(self.timesteps), results=np.asarray(self.results),
                     ep_lengths=np.asarray(self.lengths))
            os.replace(tmp, path)

        def _on_rollout_start(self) -> None:
            done = self.timesteps[-1] if self.timesteps else 0
            if self.num_timesteps // every > done // every:
                self._evaluate()

        def _on_step(self) -> bool:
            return True

        def _on_training_end(self) -> None:
            if not self.timesteps or self.timesteps[-1] != self.num_timesteps:
                self._evaluate()

    return GreedyEval()


def train_one(algo: str, seed: int, run_dir: str, steps: int, every: int, episodes: int,
              eval_envs: int) -> None:
    """Train the ``algo`` peer with ``seed`` for ``steps`` env steps into ``run_dir``
    (module docstring), in this process."""
    import torch
    torch.set_num_threads(1)
    import stable_baselines3
    from stable_baselines3.common.env_util import make_vec_env
    plan = eval_plan(f"{algo}.gin", steps)
    for stale in glob.glob(os.path.join(run_dir, "*monitor.csv")) + [
            os.path.join(run_dir, EVALUATIONS)]:
        if os.path.exists(stale):
            os.remove(stale)
    env = make_vec_env(plan.env_name, n_envs=plan.num_envs, seed=seed, monitor_dir=run_dir)
    eval_env = make_vec_env(plan.env_name, n_envs=eval_envs, seed=seed + 10_000)
    model = PEERS[algo](env, seed)
    callback = greedy_eval_callback(eval_env, every, episodes, os.path.join(run_dir, EVALUATIONS))
    start = time.time()
    model.learn(total_timesteps=steps, callback=callback)
    final = callback.results[-1]
    info = dict(algo=algo, seed=seed, env=plan.env_name, num_envs=plan.num_envs,
                total_timesteps=int(model.num_timesteps), eval_every=every,
                eval_episodes=episodes, eval_envs=eval_envs, seconds=time.time() - start,
                final_eval_return=float(np.mean(final)), sb3=stable_baselines3.__version__,
                torch=torch.__version__)
    with open(os.path.join(run_dir, FINISHED), "w") as f:
        json.dump(info, f, indent=1)
    print(f"[sb3_runs] {algo} seed {seed}: {info['total_timesteps']:,} env steps in "
          f"{info['seconds']:.0f} s, final eval return {info['final_eval_return']:.1f}")


def _child_command(args, seed: int, cpu: int) -> List[str]:
    return [sys.executable, os.path.abspath(__file__), "--algo", args.algo, "--seeds",
            str(seed), "--out", args.out, "--steps", str(args.steps), "--eval_every",
            str(args.eval_every), "--eval_episodes", str(args.eval_episodes), "--eval_envs",
            str(args.eval_envs), "--cpu", str(cpu)]


def run_seeds(args, seeds: List[int]) -> int:
    """Run ``seeds`` (each in a child process, ``args.parallel`` at once, child ``k``
    pinned to CPU ``k`` of this process's CPUs); the number of runs that failed."""
    cpus = sorted(os.sched_getaffinity(0))
    pending, running, failed = list(seeds), {}, 0
    while pending or running:
        free = [k for k in range(args.parallel) if k not in running]
        while pending and free:
            seed, slot = pending.pop(0), free.pop(0)
            run_dir = os.path.join(args.out, f"seed_{seed}")
            log = open(os.path.join(run_dir, LOG), "w")
            proc = subprocess.Popen(_child_command(args, seed, cpus[slot % len(cpus)]),
                                    stdout=log, stderr=subprocess.STDOUT)
            running[slot] = (seed, proc, log)
            print(f"[sb3_runs] {args.algo} seed {seed} started: {run_dir}", flush=True)
        time.sleep(0.2)
        for slot, (seed, proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[slot]
            if proc.returncode != 0:
                failed += 1
                print(f"[sb3_runs] {args.algo} seed {seed} FAILED (exit {proc.returncode}): "
                      f"see {log.name}", flush=True)
            else:
                with open(os.path.join(args.out, f"seed_{seed}", FINISHED)) as f:
                    done = json.load(f)
                print(f"[sb3_runs] {args.algo} seed {seed} done: final eval return "
                      f"{done['final_eval_return']:.1f} ({done['seconds']:.0f} s)", flush=True)
    return failed


def parse_args(argv: Optional[List[str]] = None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", required=True, choices=sorted(PEERS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--out", required=True, help="one directory seed_<s> per seed in here")
    p.add_argument("--parallel", type=int, default=1, help="seeds trained at once")
    p.add_argument("--steps", type=int, default=None,
                   help="env steps per run (default: the example's num_env_steps)")
    p.add_argument("--eval_every", type=int, default=None,
                   help="env steps between evaluations (default: the alf example's)")
    p.add_argument("--eval_episodes", type=int, default=None)
    p.add_argument("--eval_envs", type=int, default=None)
    p.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)  # a child's CPU
    args = p.parse_args(argv)
    plan = eval_plan(f"{args.algo}.gin", args.steps)
    args.steps = args.steps or plan.num_env_steps
    args.eval_every = args.eval_every or plan.eval_every_steps
    args.eval_episodes = args.eval_episodes or plan.eval_episodes
    args.eval_envs = args.eval_envs or plan.eval_envs
    args.out = os.path.abspath(args.out)
    if args.parallel < 1:
        p.error("--parallel must be >= 1")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.cpu is not None:  # a child: one seed, pinned
        os.sched_setaffinity(0, {args.cpu})
        train_one(args.algo, args.seeds[0], os.path.join(args.out, f"seed_{args.seeds[0]}"),
                  args.steps, args.eval_every, args.eval_episodes, args.eval_envs)
        return 0
    todo = []
    for seed in args.seeds:
        run_dir = os.path.join(args.out, f"seed_{seed}")
        if os.path.isfile(os.path.join(run_dir, FINISHED)):
            print(f"[sb3_runs] {args.algo} seed {seed}: finished already ({run_dir})")
            continue
        os.makedirs(run_dir, exist_ok=True)
        todo.append(seed)
    print(f"[sb3_runs] {args.algo}: {len(todo)} run(s) to do, {args.steps:,} env steps each, "
          f"greedy evaluation every {args.eval_every:,} env steps ({args.eval_episodes} "
          f"episodes), {args.parallel} at once", flush=True)
    failed = run_seeds(args, todo)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
