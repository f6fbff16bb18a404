"""DQN vs DQN+HER on BitFlipping: greedy success-rate curves (issue 42 item 4).

    python bench/her_bit_flipping.py --seeds 0 1 2 [--bits 15] [--steps 20000]

For each arm (``dqn_bit_flipping.gin``, ``dqn_her_bit_flipping.gin``: the same file plus
the HindsightRelabeler) and seed, trains in this process, one run after the other, and
every ``--eval_every`` env steps plays the greedy policy (argmax of the Q network) on
``--episodes`` fresh episodes (a batched numpy copy of the env's rules, seeded per
evaluation) and records the share that reaches its target within ``n`` steps. Prints
a table, writes ``bench/results/her_bit_flipping.json`` and plots the curves into
``docs/images/her_bit_flipping.png`` (matplotlib).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import gin
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ARMS = {"DQN": "dqn_bit_flipping.gin", "DQN+HER": "dqn_her_bit_flipping.gin"}


def greedy_success(q_network, n_bits: int, episodes: int, seed: int) -> float:
    """Share of ``episodes`` fresh BitFlipping episodes the greedy policy solves."""
    rng = np.random.default_rng(seed)
    state = rng.integers(0, 2, (episodes, n_bits)).astype(np.float32)
    goal = rng.integers(0, 2, (episodes, n_bits)).astype(np.float32)
    same = (state == goal).all(1)
    goal[same, 0] = 1.0 - goal[same, 0]  # the env never starts at its target
    solved = np.zeros(episodes, bool)
    for _ in range(n_bits):
        obs = {"observation": torch.from_numpy(state), "achieved_goal": torch.from_numpy(state),
               "desired_goal": torch.from_numpy(goal)}
        with torch.no_grad():
            action = q_network(obs)[0].argmax(-1).numpy()
        active = ~solved
        rows = np.nonzero(active)[0]
        state[rows, action[rows]] = 1.0 - state[rows, action[rows]]
        solved |= active & (state == goal).all(1)
    return float(solved.mean())


class SuccessCurve:
    """Trainer callback: the greedy success rate every ``every`` env steps."""

    def __init__(self, n_bits: int, every: int, episodes: int):
        self.n_bits, self.every, self.episodes = n_bits, every, episodes
        self.curve = []
        self._next = 0

    def on_iteration_end(self, algorithm, context, metrics) -> None:
        if context.env_steps >= self._next:
            rate = greedy_success(algorithm._q_network, self.n_bits, self.episodes,
                                  seed=len(self.curve))
            self.curve.append((int(context.env_steps), rate))
            self._next += self.every


def run(conf: str, seed: int, bits: int, steps: int, every: int, episodes: int) -> list:
    """``[(env_steps, greedy success rate), ...]`` of one training run."""
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    gin.clear_config()
    alf_config.parse_config(conf_file=conf, conf_params=[
        f"TrainerConfig.random_seed = {seed}", f"TrainerConfig.num_env_steps = {steps}",
        f'create_environment.env_kwargs = {{"n_bits": {bits}}}'])
    curve = SuccessCurve(bits, every, episodes)
    config = TrainerConfig()
    config.callbacks = (curve,)
    with tempfile.TemporaryDirectory() as d:
        trainer = Trainer(config, os.path.join(d, "run"), config_text=alf_config.config_text(),
                          quiet=True)
        trainer.run()
        curve.on_iteration_end(trainer.learner.algorithm, trainer.context, None)  # the end
    gin.clear_config()
    return curve.curve


def plot(results: dict, bits: int, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for arm, color in zip(results, ("tab:red", "tab:blue")):
        for i, (seed, curve) in enumerate(sorted(results[arm].items())):
            xs, ys = zip(*curve)
            ax.plot(xs, ys, color=color, alpha=0.8, label=arm if i == 0 else None)
    ax.axhline(0.9, color="grey", ls=":", lw=1)
    ax.set_xlabel("env steps")
    ax.set_ylabel("greedy success rate")
    ax.set_title(f"{bits}-bit BitFlipping: DQN vs DQN+HER (one line per seed)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--bits", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--eval_every", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    results = {arm: {} for arm in ARMS}
    for arm, conf in ARMS.items():
        for seed in args.seeds:
            start = time.perf_counter()
            results[arm][seed] = run(conf, seed, args.bits, args.steps, args.eval_every,
                                     args.episodes)
            print(f"{arm} seed {seed}: final success {results[arm][seed][-1][1]:.2f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    print("env steps  " + "  ".join(f"{arm} s{s}" for arm in ARMS for s in args.seeds))
    for i, (step, _) in enumerate(results["DQN+HER"][args.seeds[0]]):
        row = [results[arm][s][i][1] if i < len(results[arm][s]) else float("nan")
               for arm in ARMS for s in args.seeds]
        print(f"{step:9d}  " + "  ".join(f"{v:8.2f}" for v in row))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "her_bit_flipping.json"), "w") as f:
        json.dump({"bits": args.bits, "steps": args.steps, "episodes": args.episodes,
                   "curves": results}, f)
    plot(results, args.bits, os.path.join(ROOT, "docs", "images", "her_bit_flipping.png"))


if __name__ == "__main__":
    main()
