"""SAC+HER on FetchReach-v4: greedy success rate over env steps (issue 42 item 4).

    venv_robotics/bin/python bench/her_fetch_reach.py --seeds 0 1 2 [--steps 20000]

Needs gymnasium-robotics 1.4.2 and mujoco 3.3.7-3.10, which cannot share a venv with
the MuJoCo locomotion examples' mujoco 4.x (docs/hindsight_goals.md, "FetchReach").
For each seed trains ``sac_her_fetch_reach.gin`` in this process and every
``--eval_every`` env steps plays ``--episodes`` greedy episodes (``predict_step``, alf's
evaluator) on a separate env whose reward is replaced by ``info["is_success"]`` at the
episode's last step (0 elsewhere), so an episode's return is 1 when the gripper ends
within 5 cm of the target. Prints the curves and writes
``bench/results/her_fetch_reach.json``.
"""
import argparse
import json
import os
import sys
import tempfile

import gin
import gymnasium as gym

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENV = "gymnasium_robotics:FetchReach-v4"


class FinalSuccess(gym.Wrapper):
    """Reward 1 at the last step of a successful episode, else 0."""

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        done = terminated or truncated
        return obs, float(done and bool(info.get("is_success", False))), terminated, \
            truncated, info


class SuccessCurve:
    """Trainer callback: the greedy success rate every ``every`` env steps."""

    def __init__(self, every: int, episodes: int, seed: int):
        from alf.environments import create_environment
        self.env = create_environment(ENV, 1, backend="sync", seed=10_000 + seed,
                                      gym_wrappers=[FinalSuccess])
        self.every, self.episodes = every, episodes
        self.curve = []
        self._next = 0

    def on_iteration_end(self, algorithm, context, metrics) -> None:
        if context.env_steps >= self._next:
            from alf.trainers.evaluator import evaluate
            results = evaluate(algorithm, self.env, algorithm.data_transformer, self.episodes)
            rate = sum(r for r, _ in results) / len(results)
            self.curve.append((int(context.env_steps), rate))
            self._next += self.every


def run(seed: int, steps: int, every: int, episodes: int) -> list:
    """``[(env_steps, greedy success rate), ...]`` of one training run."""
    from alf import config as alf_config
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    gin.clear_config()
    alf_config.parse_config(conf_file="sac_her_fetch_reach.gin", conf_params=[
        f"TrainerConfig.random_seed = {seed}", f"TrainerConfig.num_env_steps = {steps}"])
    curve = SuccessCurve(every, episodes, seed)
    config = TrainerConfig()
    config.callbacks = (curve,)
    with tempfile.TemporaryDirectory() as d:
        trainer = Trainer(config, os.path.join(d, "run"), config_text=alf_config.config_text(),
                          quiet=True)
        trainer.run()
        curve._next = 0
        curve.on_iteration_end(trainer.learner.algorithm, trainer.context, None)  # the end
    gin.clear_config()
    return curve.curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--eval_every", type=int, default=2500)
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    curves = {}
    for seed in args.seeds:
        curves[seed] = run(seed, args.steps, args.eval_every, args.episodes)
        print(f"seed {seed}: " + ", ".join(f"{s}: {r:.2f}" for s, r in curves[seed]),
              flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "her_fetch_reach.json"), "w") as f:
        json.dump({"steps": args.steps, "episodes": args.episodes, "curves": curves}, f)


if __name__ == "__main__":
    main()
