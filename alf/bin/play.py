"""Watch / measure a trained agent from its newest checkpoint.

    python -m alf.bin.play --root_dir=runs/cp [--num_episodes 5] [--record_video out.mp4]

Rebuilds the env and algorithm from ``root_dir/config.gin``, loads the newest
valid checkpoint (``--checkpoint=<iteration>``: that one, e.g. a milestone kept in
``train/milestones/``) and runs the policy (``predict_step``, the greedy action),
printing each episode's return. ``--record_video`` writes an mp4 of env 0 (needs
the ``[video]`` extra: ``pip install -e ".[video]"``). A checkpoint holding a NaN or
infinite tensor (a run that diverged, saved by an older version) is refused in one line,
exit status 2, naming the tensor and the newest earlier finite checkpoint.

Bounded time by default:

- ``--epsilon_greedy`` defaults to 0.05 on Atari games (the evaluation
  protocol of Mnih et al. 2015: a uniformly random action with probability
  0.05 per step) and 0 (greedy) elsewhere. A purely greedy Atari agent can get
  stuck, e.g. never press FIRE after losing a life in Breakout, and then plays
  on until the 108,000-frame limit (27,000 agent steps: 200 s with a video
  on a busy 2-core CPU). Pass ``--epsilon_greedy 0`` for the greedy policy.
- ``--max_episode_steps`` (default 27,000 agent steps: Atari's 108k frames at
  frame skip 4) cuts an episode that has not ended; it is reported as it
  stands. 0: only the env's own time limit.
- every ``--progress_interval_seconds`` (5 s) a line
  ``episode 1: step 2,000, return 3.0`` goes to stderr.

Ctrl-C stops after the current step, still finishes the mp4 (closes the
writer, so the file plays), and exits with status 130; SIGTERM (``kill``,
``docker stop``) does the same and exits with 143.
"""
import os
import signal
import sys
import time
from typing import Optional, Tuple

import torch
from absl import flags

from alf import config as alf_config
from alf.bin import cli
from alf.bin.video_path import check_video_path
from alf.environments import create_environment
from alf.environments.atari import is_atari_spec
from alf.environments.env_ids import find_env_spec
from alf.errors import CheckpointError, ConfigError, UserError
from alf.experiment import EnvSpecs, build_algorithm, checkpoint_state_for
from alf.trainers.checkpointer import Checkpointer
from alf.trainers.evaluator import evaluate
from alf.trainers.experiment_signature import load_algorithm_state
from alf.trainers.interrupt_guard import stop_words
from alf.trainers.milestones import load_iteration
from alf.trainers.trainer import CONFIG_FILE
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.process_signals import STOP_SIGNALS, restore_handlers, stop_signals_ignored
from alf.utils.run_context import RunContext

ATARI_EPSILON = 0.05
DEFAULT_MAX_EPISODE_STEPS = 27_000

flags.DEFINE_string("root_dir", None, "Directory of a training run (holds config.gin and train/).")
flags.DEFINE_integer("num_episodes", 5, "Episodes to play.")
flags.DEFINE_integer("checkpoint", None, "Play the checkpoint of this iteration (one in "
                     "train/, or a milestone in train/milestones/) instead of the newest.")
flags.DEFINE_string("record_video", None, "Write an mp4 video of the episodes to this file "
                    "(.mp4, .mkv, .mov or .avi; checked before playing).")
flags.DEFINE_float("epsilon_greedy", None,
                   f"Probability of a uniformly random action per step. Default: {ATARI_EPSILON} "
                   "on Atari games (a greedy agent can wait forever for FIRE after a lost life), "
                   "0 (greedy) elsewhere.")
flags.DEFINE_integer("max_episode_steps", DEFAULT_MAX_EPISODE_STEPS,
                     "Cut an episode after this many agent steps (the default is Atari's 108k "
                     "frames at frame skip 4); 0: only the env's own time limit.")
flags.DEFINE_float("progress_interval_seconds", 5.0,
                   "Seconds between 'episode N: step S, return R' lines on stderr; 0: none.")
flags.DEFINE_integer("seed", 0, "Env seed (also seeds the epsilon-greedy random actions).")
flags.DEFINE_integer("fps", 30, "Frames per second of the recorded video.")
flags.DEFINE_multi_string("conf_param", [], "Extra gin bindings applied after config.gin")
flags.DEFINE_bool("debug", False, "Show full tracebacks.")

FLAGS = flags.FLAGS
PROGRAM = "alf.bin.play"
EXIT_INTERRUPTED = 130


def _open_video_writer(path: str, fps: int):
    try:  # deferred: imageio and imageio-ffmpeg are optional (the [video] extra)
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise UserError("--record_video needs imageio with ffmpeg: pip install -e \".[video]\"") from None
    path = os.path.expanduser(path)  # as check_video_path read it (~/videos/x.mp4)
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    return imageio.get_writer(path, fps=fps, macro_block_size=1)


def _headless_rendering() -> None:
    """Render off-screen. gymnasium's classic-control envs draw ``rgb_array`` frames
    with pygame, whose ``pygame.init()`` starts SDL's video subsystem; with no
    display SDL probes Wayland, and libwayland prints ``error: XDG_RUNTIME_DIR is
    invalid or not set`` to stderr. play only reads pixels, so SDL's dummy
    drivers are enough (set before any env is built; a user's own setting wins)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    # SDL would otherwise take over SIGTERM (turning it into a quit event nobody reads)
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")


def _check_flags() -> None:
    if not FLAGS.root_dir:
        raise ConfigError("--root_dir is required (a directory written by alf.bin.train)")
    if FLAGS.num_episodes < 1:
        raise ConfigError(f"--num_episodes must be >= 1, got {FLAGS.num_episodes}")
    if FLAGS.checkpoint is not None and FLAGS.checkpoint < 0:
        raise ConfigError(f"--checkpoint must be an iteration >= 0, got {FLAGS.checkpoint}")
    if FLAGS.epsilon_greedy is not None and not 0.0 <= FLAGS.epsilon_greedy <= 1.0:
        raise ConfigError(f"--epsilon_greedy must be in [0, 1], got {FLAGS.epsilon_greedy}")
    if FLAGS.record_video is not None:  # before anything is played or written
        check_video_path(FLAGS.record_video)
    if FLAGS.fps < 1:
        raise ConfigError(f"--fps must be >= 1, got {FLAGS.fps}")
    if FLAGS.max_episode_steps < 0:
        raise ConfigError(f"--max_episode_steps must be >= 0 (0: no cap), got "
                          f"{FLAGS.max_episode_steps}")


def _default_epsilon(env_name: str) -> float:
    """``ATARI_EPSILON`` for Atari (ale-py) games, 0 for everything else."""
    return ATARI_EPSILON if is_atari_spec(find_env_spec(env_name)) else 0.0


def _main() -> int:
    _check_flags()
    root_dir = os.path.abspath(os.path.expanduser(FLAGS.root_dir))
    saved = os.path.join(root_dir, CONFIG_FILE)
    if not os.path.isfile(saved):
        raise ConfigError(f"{saved} not found: --root_dir must be a directory written by "
                          "alf.bin.train")
    with open(saved) as f:
        alf_config.parse_config(config_text=f.read(),
                                conf_params=alf_config.iter_conf_params(FLAGS.conf_param))
    config = TrainerConfig()
    render_mode = None
    if FLAGS.record_video:
        _headless_rendering()
        render_mode = "rgb_array"
    env = create_environment(num_parallel_environments=1, seed=FLAGS.seed, render_mode=render_mode,
                             backend="sync")
    writer = None
    try:
        algorithm = build_algorithm(config, EnvSpecs.of(env), "player", RunContext())
        transformer = algorithm.data_transformer
        iteration, state = _load_checkpoint(os.path.join(root_dir, "train"))
        load_algorithm_state(algorithm, checkpoint_state_for(algorithm, state["algorithm"]),
                             root_dir)
        algorithm.eval()
        print(f"Loaded checkpoint at iteration {iteration:,} "
              f"({state['context']['env_steps']:,} env steps)", file=sys.stderr)
        epsilon = FLAGS.epsilon_greedy
        if epsilon is None:
            epsilon = _default_epsilon(env.env_name)
            if epsilon > 0:
                print(f"{env.env_name} is an Atari game: epsilon-greedy {epsilon} (a random "
                      "action with that probability per step; --epsilon_greedy 0 for the "
                      "greedy policy)", file=sys.stderr)
        torch.manual_seed(FLAGS.seed)
        # One env, batch 1: intra-op threads only add synchronisation (1,500 Breakout
        # steps with video: 9.7-13 s on 1 thread, 17-18 s on 2, busy 2-core CPU).
        torch.set_num_threads(1)
        if FLAGS.record_video:
            writer = _open_video_writer(FLAGS.record_video, FLAGS.fps)
            env = _RecordingEnv(env, writer)
        return _play(algorithm, env, transformer, epsilon)
    finally:
        if writer is not None:
            _finish_video(writer, env.frames)
        env.close()


def _load_checkpoint(train_dir: str) -> Tuple[int, dict]:
    """``(iteration, state)``: the newest readable checkpoint, or ``--checkpoint``'s."""
    checkpointer = Checkpointer(train_dir)
    if FLAGS.checkpoint is not None:
        _, state = load_iteration(train_dir, FLAGS.checkpoint, checkpointer.list_checkpoints(),
                                  f"--checkpoint={FLAGS.checkpoint}")
        return FLAGS.checkpoint, state
    found = checkpointer.load_latest()
    if found is None:
        raise CheckpointError(f"No readable checkpoint in {train_dir}; train first (or the "
                              "files are corrupt)")
    return found[0], found[1]


def _play(algorithm, env, transformer, epsilon: float) -> int:
    """Play ``--num_episodes`` episodes, printing one line each; 130 on Ctrl-C, 143 on
    SIGTERM."""
    stop = _StopOnInterrupt()
    returns = []
    with stop:
        for i in range(FLAGS.num_episodes):
            progress = _Progress(i + 1, FLAGS.progress_interval_seconds, stop)
            try:
                (ret, length), = evaluate(algorithm, env, transformer, 1, epsilon,
                                          max_episode_steps=FLAGS.max_episode_steps,
                                          on_step=progress)
            except KeyboardInterrupt:
                print(f"{PROGRAM}: {stop.words()} in episode {i + 1} at step "
                      f"{progress.step:,} (return {progress.ret:.2f} so far)", file=sys.stderr)
                break
            returns.append(ret)
            cut = " (cut at --max_episode_steps)" if (
                FLAGS.max_episode_steps and length >= FLAGS.max_episode_steps) else ""
            print(f"episode {i + 1}: return {ret:.2f}, length {length}{cut}", flush=True)
    if returns:
        print(f"average return over {len(returns)} episode{'s' if len(returns) > 1 else ''}: "
              f"{sum(returns) / len(returns):.2f}", flush=True)
    return 128 + stop.signum if stop.requested else 0


def _finish_video(writer, frames: int) -> None:
    """Close the writer (ffmpeg writes the mp4 index on close) with Ctrl-C and SIGTERM
    deferred."""
    with stop_signals_ignored():
        writer.close()
    print(f"wrote {FLAGS.record_video} ({frames} frames)", file=sys.stderr)


class _Progress:
    """``evaluate``'s ``on_step``: a progress line every ``interval`` seconds, and the
    point where a Ctrl-C (recorded by ``stop``) ends play, between two steps."""

    def __init__(self, episode: int, interval: float, stop: "_StopOnInterrupt"):
        self.episode, self.interval, self.stop = episode, interval, stop
        self.step, self.ret = 0, 0.0
        self._last = time.monotonic()

    def __call__(self, lengths, returns) -> None:
        self.step, self.ret = int(lengths[0]), float(returns[0])
        if self.stop.requested:
            raise KeyboardInterrupt
        now = time.monotonic()
        # length 0: before the first step, or the step that ended the episode (the
        # counters are reset then); the episode's end is reported by its own line
        if self.interval > 0 and self.step > 0 and now - self._last >= self.interval:
            self._last = now
            print(f"episode {self.episode}: step {self.step:,}, return {self.ret:.1f}",
                  file=sys.stderr, flush=True)


class _StopOnInterrupt:
    """While active, a first Ctrl-C or SIGTERM only sets ``requested`` (play stops after
    the current step, so a frame is never half-written); a second one raises at once.

    Attributes:
        signum: the signal of the first request (SIGINT until one arrives).
    """

    def __init__(self):
        self.requested = False
        self.signum = signal.SIGINT
        self._previous = {}

    def __enter__(self) -> "_StopOnInterrupt":
        self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        restore_handlers(self._previous)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum

    def words(self) -> str:
        """"interrupted" (Ctrl-C) or "stopped by SIGTERM"."""
        return stop_words((self.signum, None))


class _RecordingEnv:
    """Wraps a 1-env AlfEnvironment and appends ``render()`` frames to a video writer.

    Attributes:
        frames: number of frames written so far.
    """

    def __init__(self, env, writer):
        self._env, self._writer = env, writer
        self.frames = 0

    def __getattr__(self, name):
        return getattr(self._env, name)

    def _capture(self) -> None:
        frame = self._env.render()
        if frame is not None:
            self._writer.append_data(frame)
            self.frames += 1

    def reset(self):
        ts = self._env.reset()
        self._capture()
        return ts

    def step(self, action):
        ts = self._env.step(action)
        self._capture()
        return ts


def main(argv: Optional[list] = None) -> int:
    return cli.run_command(_main, PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
