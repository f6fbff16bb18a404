"""Where exploration matters: a base algorithm against the same algorithm plus an
intrinsic-reward module, over several seeds each, compared with ``alf.bin.compare``
(IQM, 95% bootstrap CIs, P(A > B); Agarwal et al. 2021).

    python bench/exploration_compare.py --task minigrid --seeds 0 1 2 3 4 --parallel 2
    python bench/exploration_compare.py --task minigrid_keycorridor --parallel 2
    python bench/exploration_compare.py --task minigrid_multiroom --parallel 2
    python bench/exploration_compare.py --task sac_mountaincar --seeds 1 2 3

Tasks (:data:`TASKS`; each arm is a shipped example, so a reader can rerun one seed):

- ``minigrid``: MiniGrid-DoorKey-8x8 (find the key, open the door, reach the goal;
  reward ``1 - 0.9 * steps / 640`` at the goal, else 0), ``ppo_minigrid.gin`` vs
  ``ppo_rnd_minigrid.gin`` (the same PPO plus an RND column), 2M env steps.
- ``minigrid_keycorridor``: MiniGrid-KeyCorridorS3R2 (find the key in a side room, unlock
  the locked room, pick up the ball; reward ``1 - 0.9 * steps / 270`` at the ball), the
  same two examples retargeted to it, 2M env steps: a task PPO alone does not solve.
- ``minigrid_multiroom``: MultiRoom N7-S4 (``MiniGrid-MultiRoom-N6-v0`` with 7 rooms of
  at most 4x4; open each door, reach the goal; reward ``1 - 0.9 * steps / 140``), PPO vs
  PPO+RND with the RND weight annealed 0.1 -> 0 over the run, 3M env steps.
- ``sac_mountaincar``: MountainCarContinuous-v0 (+100 at the flag, minus 0.1 x the
  squared action per step: a policy that stays still is a local optimum at about 0),
  ``sac_pendulum.gin`` vs ``sac_rnd_pendulum.gin`` retargeted to it, with the RND
  column's weight 1 (``arm_params``; chosen on seed 0, which the reported seeds 1-3
  exclude: with the example's 0.1 the seed-0 run stood still, return -2, after 15k
  steps; with 1 it reached the flag, 95, by 11k), 30k env steps.

Each run is ``python -m alf.bin.train --conf=<arm> --root_dir=<root>/<task>/<arm>_s<seed>
--conf_param TrainerConfig.random_seed=<seed> ...``; ``--parallel 2`` trains two at once
(one per core); the runner is ``bench/seed_compare.py``. A finished run (its ``eval.csv``
reaches the budget) is read, not rerun. Then, for the greedy evaluation return and the
training return, ``alf.bin.compare`` writes
``<root>/<task>/compare_<metric>/{compare.md,curves.png,...}``; the script prints both tables and each run's wall time (the issue's bar: under 30 minutes per run on 2
cores) and the machine's load.
"""
import os
import sys
from typing import Dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_compare  # noqa: E402

#: task -> arms (label -> conf), budget, evaluation cadence, extra bindings, target
TASKS: Dict[str, Dict] = {
    "minigrid": {
        "arms": {"ppo": "ppo_minigrid.gin", "ppo_rnd": "ppo_rnd_minigrid.gin"},
        "env_steps": 2_000_000,
        "params": ["TrainerConfig.eval_interval=25", "TrainerConfig.num_eval_episodes=20"],
        # the goal reached in at most ~half the time limit (1 - 0.9 * 320 / 640 = 0.55)
        "target": 0.55,
    },
    "minigrid_keycorridor": {
        # chosen because PPO alone does not solve it: RAPID (Zha et al. 2021, their results
        # plot, panel KeyCorridor-S3-R2) shows PPO flat at ~0.18 from 2.5M to 20M steps; a
        # random policy finds the ball in 0.47% of episodes (DoorKey-8x8: 3.2%). Picked on
        # one pilot seed per arm (seed 100, not reported): PPO 0.000 at 2M, PPO+RND 0.83
        "arms": {"ppo": "ppo_minigrid.gin", "ppo_rnd": "ppo_rnd_minigrid.gin"},
        "env_steps": 2_000_000,
        "params": ['create_environment.env_name="MiniGrid-KeyCorridorS3R2-v0"',
                   "TrainerConfig.eval_interval=25", "TrainerConfig.num_eval_episodes=20"],
        # the ball picked up in at most ~half the time limit (1 - 0.9 * 135 / 270 = 0.55)
        "target": 0.55,
    },
    "minigrid_multiroom": {
        # MultiRoom N7-S4 (7 rooms of at most 4x4, doors to open, 140-step limit): PPO alone
        # stays at 0 (RAPID, Zha et al. 2021: over 20M steps); PPO+RND solves it in ~1-5M
        # (Andres et al. 2022). Picked on pilot seed 100 (not reported), 3M steps: PPO
        # 0.000 throughout; RND with a constant weight 0.1 peaked at 0.30 and ended at 0.06;
        # with the weight annealed 0.1 -> 0 it ended at 0.74 (0.3 -> 0: 0.72)
        "arms": {"ppo": "ppo_minigrid.gin", "ppo_rnd": "ppo_rnd_minigrid.gin"},
        "arm_params": {"ppo_rnd": ["Agent.reward_weights=[1.0, @rnd_w/LinearSchedule()]",
                                   "rnd_w/LinearSchedule.start=0.1",
                                   "rnd_w/LinearSchedule.end=0.0"]},
        "env_steps": 3_000_000,
        "params": ['create_environment.env_name="MiniGrid-MultiRoom-N6-v0"',
                   "create_environment.env_kwargs={'minNumRooms': 7, 'maxNumRooms': 7, "
                   "'maxRoomSize': 4}",
                   "TrainerConfig.eval_interval=25", "TrainerConfig.num_eval_episodes=20"],
        # the goal reached in at most ~half the time limit (1 - 0.9 * 70 / 140 = 0.55)
        "target": 0.55,
    },
    "sac_mountaincar": {
        "arms": {"sac": "sac_pendulum.gin", "sac_rnd": "sac_rnd_pendulum.gin"},
        "arm_params": {"sac_rnd": ["Agent.reward_weights=[1.0, 1.0]"]},
        "env_steps": 30_000,
        "params": ['create_environment.env_name="MountainCarContinuous-v0"',
                   "TrainerConfig.eval_interval=2500", "TrainerConfig.num_eval_episodes=5",
                   "TrainerConfig.num_eval_environments=5", "TrainerConfig.evaluate=True",
                   "TrainerConfig.num_threads=1"],
        "target": 50.0,  # the flag reached (+100) for a moderate action cost
        "seeds": [1, 2, 3],  # seed 0 chose the RND weight
    },
}



def main(argv=None) -> int:
    return seed_compare.main("exploration_compare", TASKS, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
