"""The default env groups per worker (2) fit any env count: docs/async.md's "any
off-policy example, asynchronously" runs DQN's single env with one group and a note."""
import os

import pytest

from alf.errors import ConfigError
from alf.unrollers.env_groups import split_envs

SHORT = ["--conf_param", "TrainerConfig.num_iterations=2",
         "--conf_param", "TrainerConfig.num_env_steps=0",
         "--conf_param", "TrainerConfig.initial_collect_steps=64",
         "--conf_param", "TrainerConfig.num_updates_per_train_iter=1"]


def test_dqn_cart_pole_runs_async_with_the_default_groups(alf_cli, tmp_path):
    # docs/async.md's command, shortened
    run = alf_cli.run("alf.bin.train", ["--conf=dqn_cart_pole.gin", "--root_dir=runs/dqn_async",
                                        "--conf_param", "TrainerConfig.async_unroll=True", *SHORT],
                      tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    notes = [l for l in run.stderr.splitlines() if l.startswith("[alf] note: async unroll")]
    assert notes == ["[alf] note: async unroll: 1 env(s) over 1 env worker(s) cannot be split "
                     "into 2 equal env groups per worker (the default of "
                     "TrainerConfig.env_groups_per_worker); using 1. Set "
                     "create_environment.num_parallel_environments to a multiple of 2 for "
                     "double buffering."], run.stderr[-3000:]
    assert "1 env worker(s) x 1 group(s) x 1 envs" in run.stderr
    assert "iter 2/2" in run.stderr
    root = tmp_path / "runs" / "dqn_async"
    assert (root / "config.gin").exists()
    assert [f for f in os.listdir(root / "train") if f.startswith("ckpt-")] == \
        ["ckpt-0000000002.pt"]


def test_groups_set_in_the_config_are_kept_or_refused(alf_cli, tmp_path):
    run = alf_cli.run("alf.bin.train", ["--conf=dqn_cart_pole.gin", "--root_dir=runs/x",
                                        "--conf_param", "TrainerConfig.async_unroll=True",
                                        "--conf_param", "TrainerConfig.env_groups_per_worker=2",
                                        *SHORT], tmp_path, timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "must be a multiple of TrainerConfig.num_env_workers x " \
        "env_groups_per_worker (1 x 2)" in lines[0], run.stderr
    assert not (tmp_path / "runs" / "x").exists()


@pytest.mark.parametrize("num_envs, workers, groups, expected", [
    (1, 1, 2, (1, 1)),    # DQN/SAC's single env
    (3, 1, 2, (1, 3)),
    (6, 3, 2, (2, 1)),    # fits: unchanged
    (6, 2, 4, (3, 1)),    # the largest count <= the default that divides 3 envs per worker
    (8, 1, 2, (2, 4)),
])
def test_default_groups_are_lowered_to_fit(num_envs, workers, groups, expected):
    split = split_envs(num_envs, workers, groups, groups_set=False)
    assert (split.groups, split.per_group) == expected
    assert (split.note is None) == (expected[0] == groups)


def test_workers_that_do_not_divide_the_envs_are_refused():
    with pytest.raises(ConfigError, match=r"\(3\) must be a multiple of .* \(2 x 2\)"):
        split_envs(3, 2, 2, groups_set=False)
    with pytest.raises(ConfigError, match=r"\(1\) must be a multiple of .* \(1 x 2\)"):
        split_envs(1, 1, 2, groups_set=True)
