r"""Make an offline dataset (docs/design/offline_dataset_format.md) from a training run.

Export the run's saved replay buffer (the run must have saved it:
``--conf_param TrainerConfig.save_replay_buffer=True`` when training)::

    python -m alf.bin.export_dataset --root_dir=runs/sac_pendulum --out=data/pendulum_replay

or run its trained policy for N env steps (collect mode; expert, medium or noisy datasets)::

    python -m alf.bin.export_dataset --root_dir=runs/sac_pendulum --out=data/pendulum_expert \
        --collect_steps=10000 [--policy=greedy|sample|random] [--epsilon=E] [--noise_std=S] \
        [--num_envs=K] [--seed=S] [--checkpoint=ITERATION]

or act uniformly at random in an example's env (no run needed)::

    python -m alf.bin.export_dataset --conf=sac_pendulum.gin --policy=random \
        --collect_steps=10000 --out=data/pendulum_random

Datasets hold raw env data (observations before any data transformer), so a run whose
transformer changed observations or rewards (normalisers, reward clipping) can only be
used in collect mode. Exit status: 0 done, 2 bad input (nothing written), 1 the dataset does
not fit on its disk (one line with the space needed and free, checked before collecting
and, as the episode table grows, during it; nothing written), 130 interrupted (nothing
written).
"""
import os
import sys

from absl import flags

from alf.bin import cli
from alf.dataset_tools.collect import _rows, collect_dataset
from alf.dataset_tools.export import export_replay_buffer
from alf.errors import ConfigError

flags.DEFINE_string("root_dir", None, "Directory of a training run (holds config.gin and train/).")
flags.DEFINE_string("conf", None, "Gin file of the env to act in with --policy=random (instead "
                    "of --root_dir; bare names are looked up in alf/examples).")
flags.DEFINE_string("out", None, "Dataset directory to write (must not exist, see --overwrite).")
flags.DEFINE_bool("overwrite", False, "Replace an existing dataset at --out.")
flags.DEFINE_integer("collect_steps", None, "Collect mode: run the policy for this many env "
                     "steps in total (over --num_envs envs) instead of exporting the saved "
                     "replay buffer.")
flags.DEFINE_enum("policy", "greedy", ["greedy", "sample", "random"],
                  "Collect mode: greedy (predict_step), sample (rollout_step, the exploring "
                  "policy) or random (uniform over the action spec).")
flags.DEFINE_float("epsilon", 0.0, "Collect mode: probability per env and step of a uniformly "
                   "random action instead of the policy's.")
flags.DEFINE_float("noise_std", 0.0, "Collect mode: std of Gaussian noise added to continuous "
                   "actions (then clipped to the action bounds).")
flags.DEFINE_integer("num_envs", None, "Collect mode: envs stepped together (default: the "
                     "run's create_environment.num_parallel_environments).")
flags.DEFINE_integer("checkpoint", None, "Collect mode: act with the checkpoint of this "
                     "iteration instead of the newest (e.g. a medium-level policy; one in "
                     "train/, or a milestone in train/milestones/).")
flags.DEFINE_integer("seed", 0, "Collect mode: seed of the envs and of every random choice.")
flags.DEFINE_bool("overwrite_policy_output", False, "Collect mode: record the action each env "
                  "executed (clipped to the action bounds, or what the env or a gym wrapper "
                  "reports as info['executed_action']) instead of the policy's.")
flags.DEFINE_float("progress_interval_seconds", 5.0,
                   "Collect mode: seconds between progress lines on stderr; 0: none.")
flags.DEFINE_multi_string("conf_param", [], "Gin binding applied after the run's config.gin, "
                          "e.g. 'create_environment.max_episode_steps=100'")
flags.DEFINE_bool("debug", False, "Show full tracebacks.")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.export_dataset"
_COLLECT_ONLY = ("policy", "epsilon", "noise_std", "num_envs", "seed", "conf", "checkpoint",
                 "overwrite_policy_output")


def _main() -> int:
    if not FLAGS.out:
        raise ConfigError("--out is required: the dataset directory to write")
    if FLAGS.collect_steps is None:
        given = [f"--{n}" for n in _COLLECT_ONLY if FLAGS[n].present]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ConfigError(f"{', '.join(given)} {verb} only to collect mode: add "
                              "--collect_steps=N (env steps to record)")
        if not FLAGS.root_dir:
            raise ConfigError("--root_dir is required (a directory written by alf.bin.train)")
        info = export_replay_buffer(FLAGS.root_dir, FLAGS.out, FLAGS.conf_param,
                                    overwrite=FLAGS.overwrite)
        print(f"wrote {info_path(FLAGS.out)}: {info.num_steps:,} steps in {_rows(info.num_rows)} "
              f"(from {info.source.get('file')}), {info.num_episodes:,} complete episodes",
              flush=True)
        return 0
    collect_dataset(FLAGS.out, FLAGS.collect_steps, root_dir=FLAGS.root_dir, conf=FLAGS.conf,
                    conf_params=FLAGS.conf_param, policy=FLAGS.policy, epsilon=FLAGS.epsilon,
                    noise_std=FLAGS.noise_std, num_envs=FLAGS.num_envs, seed=FLAGS.seed,
                    overwrite=FLAGS.overwrite,
                    progress_interval=FLAGS.progress_interval_seconds,
                    checkpoint=FLAGS.checkpoint,
                    overwrite_policy_output=FLAGS.overwrite_policy_output)
    return 0


def info_path(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def main(argv=None) -> int:
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
