"""Datasets of action nests (issue 41, item 1): a replay buffer of a Dict-action run is
exported, random-policy datasets of a MultiDiscrete and a Dict action space are collected
(one file per action leaf, values in the space), and BC trains offline on them."""
import os

import numpy as np
import pytest

PROGRAM = "alf.bin.export_dataset"
TINY = """
include '{conf}'
create_environment.num_parallel_environments = 2
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 2
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.evaluate = False
TrainerConfig.save_replay_buffer = True
"""
BC_OFFLINE = """
import alf.examples.action_nest_envs
create_environment.env_name = "{env}"
BcAlgorithm.optimizer = @alf.optimizers.Adam()
TrainerConfig.algorithm_ctor = @BcAlgorithm
TrainerConfig.offline_buffer_dir = "{data}"
TrainerConfig.unroll_length = 0
TrainerConfig.num_iterations = 3
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.mini_batch_size = 8
TrainerConfig.evaluate = False
"""


@pytest.mark.parametrize("conf, env, files", [
    ("ppo_grid_multidiscrete.gin", "GridMove-v0", {"action.npy": ((2,), 0, 2)}),
    ("ppo_hybrid_action.gin", "HybridTarget-v0",
     {"action.sign.npy": ((), 0, 1), "action.size.npy": ((1,), 0.0, 1.0)})])
def test_collect_and_clone_an_action_nest(tmp_path, alf_cli, conf, env, files):
    data = tmp_path / "data"
    p = alf_cli.run(PROGRAM, [f"--conf={conf}", "--policy=random", "--collect_steps=40",
                              f"--out={data}"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stdout and "40 steps" in p.stdout
    for name, (shape, low, high) in files.items():
        a = np.load(os.path.join(data, name))
        assert a.shape[2:] == shape, (name, a.shape)
        assert a.min() >= low and a.max() <= high and a.min() < a.max()
    root = alf_cli.train_in_process(tmp_path / "runs" / "bc",
                                    BC_OFFLINE.format(env=env, data=data))
    assert os.path.exists(os.path.join(root, "train", "ckpt-0000000003.pt"))


def test_export_the_replay_buffer_of_a_dict_action_run(tmp_path, alf_cli):
    root = alf_cli.train_in_process(tmp_path / "runs" / "x",
                                    TINY.format(conf="ppo_hybrid_action.gin"))
    out = tmp_path / "ds"
    p = alf_cli.run(PROGRAM, [f"--root_dir={root}", f"--out={out}"], tmp_path)
    assert p.returncode == 0, p.stderr
    sign, size = np.load(out / "action.sign.npy"), np.load(out / "action.size.npy")
    assert sign.dtype == np.int64 and set(np.unique(sign)) <= {0, 1}
    assert size.shape == sign.shape + (1,) and size.dtype == np.float32


SAC_HYBRID = """
include 'sac_nested_box.gin'
TrainerConfig.offline_buffer_dir = "{data}"
TrainerConfig.offline_fraction = 0.5
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 3
TrainerConfig.initial_collect_steps = 0
TrainerConfig.mini_batch_size = 8
"""


def test_sac_on_a_box_nest_exports_collects_and_trains_on_its_dataset(tmp_path, alf_cli):
    """SAC on Dict(a=Box(2), b=Box(1)): its replay buffer exported one file per leaf, a
    greedy dataset collected with its policy, and SAC trained on that dataset mixed with
    fresh replay (hybrid_sac_pendulum.gin's way)."""
    root = alf_cli.train_in_process(tmp_path / "runs" / "sac", TINY.format(
        conf="sac_nested_box.gin") + "TrainerConfig.initial_collect_steps = 8\n")
    out = tmp_path / "replay"
    p = alf_cli.run(PROGRAM, [f"--root_dir={root}", f"--out={out}"], tmp_path)
    assert p.returncode == 0, p.stderr
    a, b = np.load(out / "action.a.npy"), np.load(out / "action.b.npy")
    assert a.shape[2:] == (2,) and b.shape == a.shape[:2] + (1,) and a.dtype == np.float32
    assert -1.0 <= a.min() < a.max() <= 1.0 and 0.0 <= b.min() < b.max() <= 2.0
    data = tmp_path / "greedy"
    p = alf_cli.run(PROGRAM, [f"--root_dir={root}", f"--out={data}", "--policy=greedy",
                              "--collect_steps=40"], tmp_path)
    assert p.returncode == 0, p.stderr
    greedy, first = np.load(data / "action.a.npy"), np.load(data / "step_type.npy") == 0
    assert greedy.shape[2:] == (2,) and first.sum() >= 10
    # one observation ([1]) only: the greedy action is the same at every acting step (the
    # FIRST of each one-step episode; the LAST step's action is not played)
    acted = greedy[first]
    assert np.allclose(acted, acted[0], atol=1e-6) and np.abs(acted[0]).max() > 0
    hybrid = alf_cli.train_in_process(tmp_path / "runs" / "hybrid",
                                      SAC_HYBRID.format(data=data))
    assert os.path.exists(os.path.join(hybrid, "train", "ckpt-0000000003.pt"))
