"""The MuJoCo PPO examples (``ppo_halfcheetah.gin``, ``ppo_hopper.gin``,
``ppo_walker2d.gin``) parse,
build and train.

Each test parses the real example file, shrinks the run to 2 iterations of a
16-step unroll (the network sizes and every other setting stay as in the file),
runs the Trainer (8 envs, as in the file) in a temporary ``root_dir`` and checks that the policy is the
intended continuous Gaussian and that the data transformers (observation and
reward normalisers) learned statistics. The learning run itself (1M steps,
~20 minutes) is not part of the test suite; see the comments in the gin file.
"""
import csv
import os
import time

import pytest
import torch
import torch.distributions as td

pytest.importorskip("mujoco")

from alf import config as alf_config  # noqa: E402
from alf.algorithms.data_transformers import (ObservationNormalizer,  # noqa: E402
                                              RewardNormalizer, SequentialDataTransformer)
from alf.algorithms.ppo_algorithm import PPOAlgorithm  # noqa: E402
from alf.networks.projection_networks import NormalProjectionNetwork  # noqa: E402
from alf.tensor_specs import BoundedTensorSpec  # noqa: E402
from alf.trainers.trainer import PROGRESS_FILE, Trainer  # noqa: E402
from alf.trainers.trainer_config import TrainerConfig  # noqa: E402

UNROLL = 16
NUM_ENVS = 8  # as in ppo_halfcheetah.gin
TINY = [
    f"TrainerConfig.unroll_length = {UNROLL}",
    "TrainerConfig.num_iterations = 2",
    "TrainerConfig.mini_batch_size = 8",
    "TrainerConfig.num_updates_per_train_iter = 2",
    "TrainerConfig.evaluate = False",
    "TrainerConfig.summary_interval = 1",
    "TrainerConfig.progress_interval_seconds = 0.0",
]

# (example, env id, observation size, action size)
EXAMPLES = [("ppo_halfcheetah.gin", "HalfCheetah-v5", 17, 6),
            ("ppo_hopper.gin", "Hopper-v5", 11, 3),
            ("ppo_walker2d.gin", "Walker2d-v5", 17, 6)]


def _normalizer_stats(transformer: SequentialDataTransformer):
    obs_norm = next(m for m in transformer.members if isinstance(m, ObservationNormalizer))
    rew_norm = next(m for m in transformer.members if isinstance(m, RewardNormalizer))
    stats = list(obs_norm.normalizer.normalizers.values())
    assert len(stats) == 1, "the MuJoCo observation is one float vector"
    return stats[0], rew_norm.return_stats


@pytest.mark.parametrize("conf,env_name,obs_dim,act_dim", EXAMPLES)
def test_mujoco_ppo_example_builds_and_trains(conf, env_name, obs_dim, act_dim, tmp_path,
                                              clean_gin):
    start = time.perf_counter()
    alf_config.parse_config(conf_file=conf, conf_params=TINY)
    config = TrainerConfig()
    # the full-run settings the example promises
    assert config.num_env_steps == 1_000_000
    assert config.mini_batch_size == 8 and config.mini_batch_length == 1
    trainer = Trainer(config, str(tmp_path / "run"), config_text=alf_config.config_text(),
                      quiet=True)
    try:
        alg = trainer.algorithm
        assert isinstance(alg, PPOAlgorithm)
        assert trainer.env.env_name == env_name and trainer.env.batch_size == NUM_ENVS

        # continuous, bounded action spec; unbounded normalised observation
        spec = alg.action_spec
        assert isinstance(spec, BoundedTensorSpec)
        assert spec.is_continuous() and not spec.is_discrete()
        assert tuple(spec.shape) == (act_dim,)
        assert tuple(alg.observation_spec.shape) == (obs_dim,)
        assert alg.observation_spec.dtype == torch.float32

        # Gaussian head: state-independent log-std starting at 0, no tanh squashing
        head = alg._actor_network._projection
        assert isinstance(head, NormalProjectionNetwork)
        assert not head._state_dependent_std and not head._scale_distribution
        assert not head._squash_mean
        assert torch.equal(head._log_std.detach(), torch.zeros(act_dim))
        obs = torch.randn(4, obs_dim)
        dist, _ = alg._actor_network(obs)
        assert isinstance(dist, td.Independent) and isinstance(dist.base_dist, td.Normal)
        assert dist.event_shape == (act_dim,) and dist.batch_shape == (4,)
        assert torch.allclose(dist.base_dist.scale, torch.ones(4, act_dim))

        transformer = alg.data_transformer
        assert isinstance(transformer, SequentialDataTransformer)
        obs_stats, ret_stats = _normalizer_stats(transformer)
        assert float(obs_stats.count) == 0 and float(ret_stats.count) == 0
        mean0, var0 = obs_stats.mean.clone(), obs_stats.var.clone()
        params0 = [p.detach().clone() for p in alg.parameters()]

        trainer.run()
    finally:
        trainer.close()

    # 2 iterations of UNROLL steps of NUM_ENVS envs, every step folded into the statistics
    steps = 2 * UNROLL * NUM_ENVS
    assert trainer.context.iteration == 2
    assert trainer.context.env_steps == steps
    assert float(obs_stats.count) == steps
    assert not torch.equal(obs_stats.mean, mean0) and not torch.equal(obs_stats.var, var0)
    assert torch.isfinite(obs_stats.mean).all() and (obs_stats.var > 0).all()
    # discounted returns of the non-FIRST steps (at least each env's very first
    # step is FIRST; a random hopper also falls and restarts within 32 steps)
    assert 0 < float(ret_stats.count) <= steps - NUM_ENVS
    assert float(ret_stats.var) > 0 and float(ret_stats.var) != 1.0

    # the networks were trained and stayed finite
    params1 = list(alg.parameters())
    assert any(not torch.equal(p0, p1.detach()) for p0, p1 in zip(params0, params1))
    assert all(torch.isfinite(p).all() for p in params1)

    root = tmp_path / "run"
    assert (root / "config.gin").is_file()
    with open(root / PROGRESS_FILE) as f:
        rows = list(csv.DictReader(f))
    assert rows and int(rows[-1]["env_steps"]) == steps
    assert any(os.scandir(root / "train")), "a checkpoint was written"
    assert time.perf_counter() - start < 15.0
