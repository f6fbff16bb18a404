"""Milestone checkpoints (``TrainerConfig.milestone_env_steps`` / ``milestone_seconds``,
issue 29 item 5): kept in ``train/milestones/`` at the right env steps, never pruned by
the ``num_checkpoints`` rotation, continued by a resume, and played by
``alf.bin.play --checkpoint=<iteration>``."""
import os

import pytest
import torch

from alf.errors import ConfigError
from alf.trainers.milestones import MilestoneClock, list_milestones

# tiny PPO: 2 envs x 8 steps = 16 env steps an iteration
MILESTONES = ["TrainerConfig.milestone_env_steps=40", "TrainerConfig.num_checkpoints=1",
              "TrainerConfig.checkpoint_interval=2"]


def _kept(root):
    return [(m.iteration, m.env_steps) for m in list_milestones(str(root / "train"))]


def _ordinary(root):
    return sorted(n for n in os.listdir(root / "train") if n.endswith(".pt"))


@pytest.fixture
def run_with_milestones(make_trainer, tmp_path):
    """A 10-iteration run with a milestone every 40 env steps and one rotating checkpoint."""
    root = tmp_path / "run"
    make_trainer(root, params=MILESTONES + ["TrainerConfig.num_iterations=10"]).run()
    return root


def test_milestones_are_kept_at_their_env_steps_through_rotation(run_with_milestones):
    root = run_with_milestones
    # the first iteration boundary at or past 40, 80, 120, 160 env steps
    assert _kept(root) == [(3, 48), (5, 80), (8, 128), (10, 160)]
    assert sorted(os.listdir(root / "train" / "milestones")) == [
        "ckpt-0000000003-env_steps-48.pt", "ckpt-0000000005-env_steps-80.pt",
        "ckpt-0000000008-env_steps-128.pt", "ckpt-0000000010-env_steps-160.pt"]
    # the rotation (num_checkpoints=1, a save every 2 iterations) kept only the newest
    assert _ordinary(root) == ["ckpt-0000000010.pt"]
    for m in list_milestones(str(root / "train")):  # whole checkpoints of their iteration
        state = torch.load(m.path, map_location="cpu", weights_only=True)
        assert state["complete"] and state["iteration"] == m.iteration
        assert state["context"]["env_steps"] == m.env_steps
        assert "algorithm" in state


def test_a_resume_goes_on_counting_and_keeps_the_old_ones(run_with_milestones, make_trainer):
    root = run_with_milestones
    before = {m.path: os.stat(m.path).st_mtime_ns for m in list_milestones(str(root / "train"))}
    make_trainer(root, params=MILESTONES + ["TrainerConfig.num_iterations=15"]).run()
    assert _kept(root) == [(3, 48), (5, 80), (8, 128), (10, 160), (13, 208), (15, 240)]
    assert all(os.stat(p).st_mtime_ns == t for p, t in before.items())
    assert _ordinary(root) == ["ckpt-0000000015.pt"]


def test_milestone_seconds_in_a_real_run(make_trainer, tmp_path):
    """Every iteration takes longer than a microsecond: each one is a milestone."""
    root = tmp_path / "run"
    make_trainer(root, params=["TrainerConfig.milestone_seconds=1e-6",
                               "TrainerConfig.num_iterations=3"]).run()
    assert [i for i, _ in _kept(root)] == [1, 2, 3]


def test_the_clock_makes_one_milestone_per_passed_multiple():
    clock = MilestoneClock(every_env_steps=0, every_seconds=10.0)
    assert [clock.due(16 * i, s) for i, s in enumerate([9.9, 10.0, 19.0, 35.0, 39.0], 1)] == [
        False, True, False, True, False]  # 35 s passed 20 and 30: one milestone
    clock.start(env_steps=100, seconds=41.0)  # a resume
    assert not clock.due(116, 49.0) and clock.due(132, 50.5)
    assert not MilestoneClock(0, 0.0).enabled


def test_milestone_env_steps_is_refused_for_pure_offline_training(clean_gin):
    from alf.trainers.trainer_config import TrainerConfig
    with pytest.raises(ConfigError, match="milestone_env_steps is never reached in pure offline"):
        TrainerConfig(algorithm_ctor=object, offline_buffer_dir="data", unroll_length=0,
                      num_iterations=5, milestone_env_steps=100)


def test_play_picks_a_milestone(run_with_milestones, alf_cli, tmp_path):
    """``--checkpoint=<iteration>`` plays a milestone; an iteration without a checkpoint is
    one line listing the ordinary checkpoints and the milestones."""
    root = str(run_with_milestones)
    common = ["--root_dir", root, "--num_episodes", "1", "--max_episode_steps", "20"]
    procs = [alf_cli.start("alf.bin.play", common + ["--checkpoint", str(n)], tmp_path)
             for n in (5, 4)]
    (out5, err5), (_, err4) = [p.communicate(timeout=300) for p in procs]
    assert procs[0].returncode == 0, err5
    assert "Loaded checkpoint at iteration 5 (80 env steps)" in err5
    assert "episode 1: return" in out5
    assert procs[1].returncode == 2, err4
    assert err4.strip().splitlines() == [
        f"alf.bin.play: error: --checkpoint=4: {os.path.join(root, 'train')} has no checkpoint "
        "of iteration 4 (it has: 10; milestones: 3 (48 env steps), 5 (80 env steps), "
        "8 (128 env steps), 10 (160 env steps))"]

