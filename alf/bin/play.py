"""Watch / measure a trained agent from its newest checkpoint.

    python -m alf.bin.play --root_dir=runs/cp [--num_episodes 5] [--record_video out.mp4]

Rebuilds the env and algorithm from ``root_dir/config.gin``, loads the newest
valid checkpoint and runs the greedy policy (``predict_step``), printing each
episode's return. ``--record_video`` writes an mp4 of env 0 (needs the
``[video]`` extra: ``pip install -e ".[video]"``).
"""
import os
import sys

from absl import flags

flags.DEFINE_string("root_dir", None, "Directory of a training run (holds config.gin and train/).")
flags.DEFINE_integer("num_episodes", 5, "Episodes to play.")
flags.DEFINE_string("record_video", None, "Write an mp4 video of the episodes to this file.")
flags.DEFINE_float("epsilon_greedy", 0.0, "Probability of a random action.")
flags.DEFINE_integer("seed", 0, "Env seed.")
flags.DEFINE_integer("fps", 30, "Frames per second of the recorded video.")
flags.DEFINE_multi_string("conf_param", [], "Extra gin bindings applied after config.gin.")
flags.DEFINE_bool("debug", False, "Show full tracebacks.")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.play"


def _open_video_writer(path: str, fps: int):
    from alf.errors import UserError
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise UserError("--record_video needs imageio with ffmpeg: pip install -e \".[video]\"") from None
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    return imageio.get_writer(path, fps=fps, macro_block_size=1)


def _main() -> int:
    import torch

    from alf import config as alf_config
    from alf.algorithms.data_transformers import create_data_transformer
    from alf.environments import create_environment
    from alf.errors import CheckpointError, ConfigError
    from alf.trainers.checkpointer import Checkpointer
    from alf.trainers.evaluator import evaluate
    from alf.trainers.trainer import CONFIG_FILE
    from alf.trainers.trainer_config import TrainerConfig
    from alf.utils.run_context import RunContext

    if not FLAGS.root_dir:
        raise ConfigError("--root_dir is required (a directory written by alf.bin.train)")
    if FLAGS.num_episodes < 1:
        raise ConfigError(f"--num_episodes must be >= 1, got {FLAGS.num_episodes}")
    root_dir = os.path.abspath(os.path.expanduser(FLAGS.root_dir))
    saved = os.path.join(root_dir, CONFIG_FILE)
    if not os.path.isfile(saved):
        raise ConfigError(f"{saved} not found: --root_dir must be a directory written by "
                          "alf.bin.train")
    with open(saved) as f:
        alf_config.parse_config(config_text=f.read(),
                                conf_params=alf_config.iter_conf_params(FLAGS.conf_param))
    config = TrainerConfig()
    render_mode = "rgb_array" if FLAGS.record_video else None
    env = create_environment(num_parallel_environments=1, seed=FLAGS.seed, render_mode=render_mode,
                             backend="sync")
    try:
        transformer = create_data_transformer(config.data_transformer_ctor, env.observation_spec())
        algorithm = config.algorithm_ctor(
            observation_spec=transformer.transformed_observation_spec, action_spec=env.action_spec(),
            reward_spec=env.reward_spec(), env=None, config=None, context=RunContext())
        algorithm.set_data_transformer(transformer)
        found = Checkpointer(os.path.join(root_dir, "train")).load_latest()
        if found is None:
            raise CheckpointError(f"No readable checkpoint in {os.path.join(root_dir, 'train')}; "
                                  "train first (or the files are corrupt)")
        iteration, state, _ = found
        algorithm.load_state_dict(state["algorithm"])
        algorithm.eval()
        print(f"Loaded checkpoint at iteration {iteration:,} "
              f"({state['context']['env_steps']:,} env steps)", file=sys.stderr)
        writer = _open_video_writer(FLAGS.record_video, FLAGS.fps) if FLAGS.record_video else None
        frames = {"n": 0}
        if writer is not None:
            env = _RecordingEnv(env, writer, frames)
        returns = []
        for i in range(FLAGS.num_episodes):
            (ret, length), = evaluate(algorithm, env, transformer, 1, FLAGS.epsilon_greedy)
            returns.append(ret)
            print(f"episode {i + 1}: return {ret:.2f}, length {length}")
        print(f"average return over {len(returns)} episodes: {sum(returns) / len(returns):.2f}")
        if writer is not None:
            writer.close()
            print(f"wrote {FLAGS.record_video} ({frames['n']} frames)", file=sys.stderr)
        del torch
    finally:
        env.close()
    return 0


class _RecordingEnv:
    """Wraps a 1-env AlfEnvironment and appends ``render()`` frames to a video writer."""

    def __init__(self, env, writer, counter):
        self._env, self._writer, self._counter = env, writer, counter

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _capture(self):
        frame = self._env.render()
        if frame is not None:
            self._writer.append_data(frame)
            self._counter["n"] += 1

    def reset(self):
        ts = self._env.reset()
        self._capture()
        return ts

    def step(self, action):
        ts = self._env.step(action)
        self._capture()
        return ts


def main(argv=None) -> int:
    from alf.bin import cli
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
