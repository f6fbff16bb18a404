"""A resume's ``--conf_param`` change of ``Agent.reward_weights`` is what the run uses
from then on, and what the log says (docs/design/config_on_resume.md); weights fixed by
``set_reward_weights`` persist across a plain resume."""
import os

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from alf.trainers.checkpointer import Checkpointer

RND = """
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
Agent.reward_modules = [@RNDRewardModule]
Agent.reward_weights = [1.0, 0.1]
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 8
RNDRewardModule.optimizer = @rnd/alf.optimizers.Adam()
rnd/alf.optimizers.Adam.lr = 1e-3
TrainerConfig.num_iterations = 2
TrainerConfig.checkpoint_interval = 1
"""


def _weights_in_newest_checkpoint(root):
    _, state, _ = Checkpointer(os.path.join(str(root), "train")).load_latest()
    return state["algorithm"]["_reward_weights"].tolist()


def _weight_points(root, tag="Reward/RNDRewardModule/weight"):
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    return {e.step: round(e.value, 6) for e in acc.Scalars(tag)}


@pytest.fixture
def run(tmp_path, alf_cli):
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + RND, "rnd.gin")
    alf_cli.train_in_process(tmp_path / "run", alf_cli.TINY_PPO + RND)
    assert _weights_in_newest_checkpoint(tmp_path / "run") == pytest.approx([1.0, 0.1])
    return tmp_path


def test_a_resume_with_new_reward_weights_uses_them_and_says_so(run, alf_cli):
    resumed = alf_cli.run("alf.bin.train", [
        "--root_dir", "run", "--conf_param", "Agent.reward_weights=[1.0, 0.5]",
        "--conf_param", "TrainerConfig.num_iterations=4"], run)
    assert resumed.returncode == 0, resumed.stderr
    applied = [l for l in resumed.stderr.splitlines() if "applied to the saved config" in l]
    assert applied == ["[alf] applied to the saved config (kept for later resumes): "
                       "Agent.reward_weights=[1.0, 0.5], TrainerConfig.num_iterations=4"]
    assert _weights_in_newest_checkpoint(run / "run") == pytest.approx([1.0, 0.5])
    points = _weight_points(run / "run")
    assert points[1] == points[2] == 0.1 and points[3] == points[4] == 0.5, points


def test_weights_fixed_by_the_api_persist_unless_the_config_changes(run, alf_cli,
                                                                    make_trainer, capsys):
    """set_reward_weights (from code, e.g. a callback) survives a plain resume; a resume
    that changes Agent.reward_weights replaces them, and says so in one line."""
    conf = alf_cli.TINY_PPO + RND
    trainer = make_trainer(run / "run", conf, ["TrainerConfig.num_iterations=3"])
    assert trainer.restore_checkpoint()
    trainer.algorithm.set_reward_weights([1.0, 0.7])
    trainer.save_checkpoint()
    trainer.close()
    plain = alf_cli.run("alf.bin.train", ["--root_dir", "run", "--conf_param",
                                          "TrainerConfig.num_iterations=4"], run)
    assert plain.returncode == 0, plain.stderr
    assert _weights_in_newest_checkpoint(run / "run") == pytest.approx([1.0, 0.7])
    assert "set_reward_weights" not in plain.stderr
    changed = alf_cli.run("alf.bin.train", [
        "--root_dir", "run", "--conf_param", "Agent.reward_weights=[1.0, 0.2]",
        "--conf_param", "TrainerConfig.num_iterations=5"], run)
    assert changed.returncode == 0, changed.stderr
    assert _weights_in_newest_checkpoint(run / "run") == pytest.approx([1.0, 0.2])
    notes = [l for l in changed.stderr.splitlines() if "set_reward_weights" in l]
    assert notes == ["[alf] Agent.reward_weights changed in the config: its [1.0, 0.2] "
                     "replace the weights [1.0, 0.7] that set_reward_weights had fixed"], \
        changed.stderr
    assert _weight_points(run / "run")[5] == 0.2


@pytest.mark.parametrize("param,why", [
    ("alf.optimizers.Adam.betas=(0.5, 0.9)", "Adam.betas"),
    ("rnd/alf.optimizers.Adam.eps=1e-5", "Adam.eps"),
    # one element of a tuple: applied through element_binding, undone all the same
    ("rnd/alf.optimizers.Adam.betas[1]=0.99", "Adam.betas"),
    # in torch's param groups too (Optimizer.load_state_dict restores them whole)
    ("rnd/alf.optimizers.Adam.weight_decay=0.1", "Adam.weight_decay"),
    ("rnd/alf.optimizers.Adam.amsgrad=True", "Adam.amsgrad"),
])
def test_a_resume_refuses_a_change_the_checkpoint_would_undo(run, alf_cli, param, why):
    """An optimizer's betas/eps are restored with its state: the change cannot apply, so
    the resume refuses it in one line (exit 2) instead of saying it applied it."""
    config = (run / "run" / "config.gin").read_text()
    files = sorted(os.listdir(run / "run"))
    resumed = alf_cli.run("alf.bin.train", ["--root_dir", "run", "--conf_param", param,
                                            "--conf_param", "TrainerConfig.num_iterations=3"],
                          run)
    assert resumed.returncode == 2, resumed.stderr
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in resumed.stderr, resumed.stderr
    assert f"--conf_param '{param}'" in lines[0] and why in lines[0]
    assert "restored from the checkpoint" in lines[0] and "new --root_dir" in lines[0]
    assert (run / "run" / "config.gin").read_text() == config
    assert sorted(os.listdir(run / "run")) == files
