"""Checkpoints written before the Learner change (commit ea42a4b) still load and resume.

``fixtures/checkpoints_ea42a4b/`` holds two run directories made at that commit with
``python -m alf.bin.train`` (config.gin, progress.csv, train/): a tiny PPO CartPole run
(2 iterations) and a tiny SAC Pendulum run with its replay buffer saved (140 iterations).
"""
import os
import shutil

import gin
import pytest
import torch

from alf import config as alf_config
from alf import nest

OLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "checkpoints_ea42a4b")


def _newest(run) -> str:
    names = sorted(n for n in os.listdir(os.path.join(run, "train")) if n.startswith("ckpt-"))
    return os.path.join(run, "train", names[-1])


@pytest.mark.parametrize("name, iteration", [("ppo", 2), ("sac", 140)])
def test_old_checkpoint_restores_every_tensor(tmp_path, name, iteration):
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig
    run = tmp_path / name
    shutil.copytree(os.path.join(OLD, name), run)
    saved = torch.load(_newest(run), weights_only=False)
    gin.clear_config()
    try:
        alf_config.parse_config(conf_file=str(run / "config.gin"))
        trainer = Trainer(TrainerConfig(), str(run), quiet=True)
        try:
            assert trainer.restore_checkpoint()
            assert trainer.context.iteration == iteration
            mine = dict(nest.flatten_with_paths(trainer.algorithm.state_dict()))
            theirs = dict(nest.flatten_with_paths(saved["algorithm"]))
            assert mine.keys() == theirs.keys()
            for key, value in theirs.items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(mine[key], value), key
                else:
                    assert mine[key] == value, key
            rb = trainer.learner.replay_buffer
            if name == "sac":  # saved with the checkpoint: restored in full
                assert rb.total_size() == 128  # 2 envs x a 64-step ring, wrapped
            else:  # PPO's buffer is cleared every iteration: nothing to restore
                assert trainer.learner.clears_replay_buffer
        finally:
            trainer.close()
    finally:
        gin.clear_config()


@pytest.mark.parametrize("name, more", [("ppo", 4), ("sac", 150)])
def test_old_run_resumes_from_the_command_line(alf_cli, tmp_path, name, more):
    shutil.copytree(os.path.join(OLD, name), tmp_path / name)
    out = alf_cli.run("alf.bin.train", ["--conf", "config.gin", "--root_dir", ".", "--quiet",
                                        "--conf_param", f"TrainerConfig.num_iterations={more}",
                                        "--conf_param", "TrainerConfig.num_env_steps=0"],
                      tmp_path / name)
    assert out.returncode == 0, out.stderr
    assert "[alf] resumed from iteration" in out.stderr
    assert os.path.basename(_newest(tmp_path / name)) == f"ckpt-{more:010d}.pt"
