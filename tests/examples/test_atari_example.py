"""The Atari examples end to end, as users run them: ``python -m alf.bin.train
--conf=ppo_atari.gin`` from an unrelated directory (shrunk to 2 short
iterations), then ``python -m alf.bin.play --record_video`` writes a video of
the game screen; ``dqn_atari.gin`` builds Nature DQN on stacked frames.

The learning runs (500k agent steps for PPO on Breakout, 1M for DQN on Pong)
are benchmarks: docs/benchmarks.md and docs/atari.md.
"""
import os
import re

import pytest
import torch

pytest.importorskip("ale_py")

SHRINK = ["create_environment.num_parallel_environments=2", "TrainerConfig.unroll_length=8",
          "TrainerConfig.num_iterations=2", "TrainerConfig.num_env_steps=0",
          "TrainerConfig.mini_batch_size=8", "TrainerConfig.num_threads=1",
          "TrainerConfig.progress_interval_seconds=0.0"]


def _params(values):
    return [a for v in values for a in ("--conf_param", v)]


@pytest.fixture(scope="module")
def trained_breakout(alf_cli, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("atari_cwd")
    proc = alf_cli.run("alf.bin.train", ["--conf=ppo_atari.gin", "--root_dir=runs/breakout",
                                         *_params(SHRINK)], cwd, timeout=300)
    return cwd, proc


def test_ppo_atari_trains_from_any_directory(trained_breakout):
    cwd, proc = trained_breakout
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = cwd / "runs" / "breakout"
    assert any(f.startswith("ckpt-") for f in os.listdir(root / "train"))
    config = (root / "config.gin").read_text()
    assert "ALE/Breakout-v5" in config and "FrameStacker" in config
    assert "env steps 32 " in proc.stderr + proc.stdout  # 2 iterations x 2 envs x 8 steps


def test_play_records_a_video_of_the_game_screen(trained_breakout, alf_cli):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    cwd, proc = trained_breakout
    assert proc.returncode == 0, proc.stderr[-3000:]
    play = alf_cli.run("alf.bin.play", ["--root_dir=runs/breakout", "--num_episodes", "1",
                                        "--record_video", "out/breakout.mp4",
                                        *_params(["create_environment.max_episode_steps=40"])],
                       cwd, timeout=300)
    assert play.returncode == 0, play.stderr[-3000:]
    # truncated at 40 x 4 emulator frames, counting the no-op frames of the reset
    m = re.search(r"^episode 1: return [\d.]+, length (\d+)$", play.stdout, re.M)
    assert m and 30 <= int(m.group(1)) <= 40, play.stdout
    frames = imageio.mimread(str(cwd / "out" / "breakout.mp4"), memtest=False)
    assert len(frames) == int(m.group(1)) + 1  # the reset frame and one per agent step
    assert frames[0].shape == (210, 160, 3)  # the RGB game screen, not the 84x84 input
    assert len({f.tobytes() for f in frames}) > 1  # the game moves


def test_dqn_atari_builds_nature_dqn_on_stacked_frames(make_trainer, tmp_path):
    trainer = make_trainer(tmp_path / "pong", "include 'dqn_atari.gin'\n",
                           params=["create_environment.num_parallel_environments=1",
                                   "TrainerConfig.replay_buffer_length=64",
                                   "TrainerConfig.num_threads=1"])
    alg, learner = trainer.algorithm, trainer.learner
    assert trainer.env.env_name == "ALE/Pong-v5" and alg.action_spec.num_actions == 6
    assert tuple(alg.observation_spec.shape) == (4, 84, 84)
    n_params = sum(p.numel() for p in alg._q_network.parameters())
    # Nature DQN: convs 8,224 + 32,832 + 36,928, fc 3136*512+512, head 512*6+6
    assert n_params == 8224 + 32832 + 36928 + 3136 * 512 + 512 + 512 * 6 + 6
    learner.prepare()
    assert tuple(learner.replay_buffer.data_spec.time_step.observation.shape) == (1, 84, 84)
    assert learner.replay_buffer.data_spec.time_step.observation.dtype == torch.uint8
